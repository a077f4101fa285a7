/**
 * Player transfers (`/api/plugin/transfer`, `/transfer-to-group`): a transfer is an intent kept in
 * the key-value store until the player arrives on the target, and delivered to the instance that
 * holds the player's connection (its proxy, or the server itself when the player joined directly)
 * through that instance's plugin event stream (`event: transfer`).
 *
 * - `cloud:v1:transfer:<id>`: the pending transfer ({@link Transfer}), with an expiry well past
 *   {@link transferTimeoutMs} so a cluster that was down does not keep it for ever;
 * - `cloud:v1:transfer-player:<uuid>`: the id of the player's pending transfer (one per player: a
 *   newer request supersedes it).
 *
 * A transfer completes when the player joins the target (PLAYER_TRANSFER is published by the
 * registry); it fails, and the holder and the requester get `event: transfer-failed`, when the
 * target or the holder finishes (TARGET_GONE, HOLDER_GONE), when a newer request supersedes it
 * (SUPERSEDED), when the player left the network (PLAYER_LEFT, found by the sweep), or after
 * {@link transferTimeoutMs} (TIMEOUT). Only the controller whose
 * compare-and-delete removes the record answers, so a transfer ends once. A holder's stream that
 * (re)connects gets every pending transfer for it again: delivery is at least once, by transfer id.
 */
import { randomUUID } from "node:crypto";
import { KV_KEY_PREFIX } from "../coordination/keys.js";
import { EventTypes, type InstanceStateChangedPayload } from "../events/event-types.js";
import type { CloudEvent, EventBus, Subscription } from "../events/types.js";
import type { Logger } from "../logs/types.js";
import type { Clock, Timer } from "../shared/clock.js";
import type { KvStore } from "../store/ports.js";
import type { Transfer, TransferFailure } from "../sdk/contracts/plugin-stream.js";
import { isoFromMs } from "../domain/shared/time.js";
import { SingleFlight } from "../domain/shared/single-flight.js";
import type { OnlinePlayer, PlayerService } from "./players.js";
import type { PluginDeliveries } from "./plugin-deliveries.js";

/** A transfer not completed after this long fails with TIMEOUT. */
export const transferTimeoutMs = 60_000;
/** How often each controller looks for transfers to fail (timed out, target or holder gone). */
export const transferSweepIntervalMs = 5_000;
/** A pending transfer's record expires this long after its timeout (the sweep fails it first). */
export const transferRecordGraceMs = 300_000;

/** Prefix of the transfer records. */
export const TRANSFER_KEY_PREFIX = `${KV_KEY_PREFIX}transfer:`;
/** `cloud:v1:transfer:<id>`. */
export const transferKey = (id: string): string => `${TRANSFER_KEY_PREFIX}${id}`;
/** `cloud:v1:transfer-player:<uuid>`: the player's pending transfer id. */
export const playerTransferKey = (uuid: string): string => `${KV_KEY_PREFIX}transfer-player:${uuid}`;

/** A transfer and why one failed: the plugin stream's contract, declared once in the SDK. */
export type { Transfer, TransferFailure };

/** What the service needs to know of instances. */
export interface TransferInstances {
  /** Whether the instance exists and is not finished. */
  isLive(instanceId: string): Promise<boolean>;
}

export interface TransferServiceDeps {
  kv: KvStore;
  players: PlayerService;
  deliveries: PluginDeliveries;
  instances: TransferInstances;
  events: EventBus;
  clock: Clock;
  logger: Logger;
}

/** Queues, delivers, completes and fails transfers; see the module comment. */
export class TransferService {
  private subscription: Subscription | null = null;
  private sweepTimer: Timer | null = null;
  private sweeping: Promise<void> | null = null;
  /** Concurrent reads of the pending transfers (streams opening, instances finishing) share one scan. */
  private readonly pendingReads = new SingleFlight<Transfer[]>();
  /** Instances finished since the last look at the pending transfers: one scan serves them all. */
  private finishedWaiting = new Set<string>();
  private finishedPass: Promise<void> | null = null;

  constructor(private readonly deps: TransferServiceDeps) {
    deps.players.onArrival((player) => this.arrived(player));
  }

  /** Reacts to finished instances and starts the periodic sweep. */
  start(): void {
    this.subscription = this.deps.events.subscribe(EventTypes.INSTANCE_STATE_CHANGED, async (event: CloudEvent) => {
      if (event.source.startsWith("peer:")) return;
      const data = event.data as InstanceStateChangedPayload;
      if (data.newState === "STOPPED" || data.newState === "CRASHED") await this.instanceFinished(data.instanceId);
    });
    this.sweepTimer = this.deps.clock.setInterval(() => void this.sweep(), transferSweepIntervalMs, { unref: true });
  }

  async stop(): Promise<void> {
    this.subscription?.unsubscribe();
    this.sweepTimer?.cancel();
    await this.sweeping;
  }

  /** Queues a move of `player` to `targetInstanceId` and sends it to the player's holder. */
  async request(player: OnlinePlayer, targetInstanceId: string, targetGroup: string | null, requestedBy: string): Promise<Transfer> {
    const holder = player.proxyInstanceId ?? player.instanceId;
    if (holder === null) throw new Error(`player ${player.uuid} is on no instance`);
    const transfer: Transfer = {
      id: randomUUID(),
      playerUuid: player.uuid,
      playerName: player.name,
      fromInstanceId: player.instanceId,
      targetInstanceId,
      targetGroup,
      holderInstanceId: holder,
      requestedBy,
      requestedAt: isoFromMs(this.deps.clock.nowMs()),
      state: "PENDING",
      failureReason: null,
    };
    const { kv } = this.deps;
    await kv.set(transferKey(transfer.id), JSON.stringify(transfer), { ttlMs: transferTimeoutMs + transferRecordGraceMs });
    const index = playerTransferKey(player.uuid);
    const previous = await kv.get(index);
    await kv.set(index, transfer.id, { ttlMs: transferTimeoutMs + transferRecordGraceMs });
    if (previous !== null && previous !== transfer.id) {
      const older = await this.get(previous);
      if (older) await this.fail(older, "SUPERSEDED");
    }
    await this.deps.deliveries.send({ instanceId: holder, event: "transfer", data: { ...transfer } });
    return transfer;
  }

  /** A pending transfer, or null. */
  async get(id: string): Promise<Transfer | null> {
    return parseTransfer(await this.deps.kv.get(transferKey(id)));
  }

  /**
   * Every pending transfer (read at sweep time, for the holder's stream on connect and when
   * instances finish). Callers asking while a read runs share the next one, which starts after they
   * asked: a burst of 500 streams opening costs two scans of the store's keys, not 500.
   */
  pending(): Promise<Transfer[]> {
    return this.pendingReads.run("pending", async () => {
      const keys = await this.deps.kv.keys(TRANSFER_KEY_PREFIX);
      const values = await Promise.all(keys.map((key) => this.deps.kv.get(key)));
      return values.map(parseTransfer).filter((t): t is Transfer => t !== null);
    });
  }

  /** Pending transfers the instance has to carry out. */
  async pendingFor(holderInstanceId: string): Promise<Transfer[]> {
    return (await this.pending()).filter((t) => t.holderInstanceId === holderInstanceId);
  }

  /** How many transfers wait (`cloud_workflows_pending_transfers`). */
  async pendingCount(): Promise<number> {
    return (await this.deps.kv.keys(TRANSFER_KEY_PREFIX)).length;
  }

  /** Fails every pending transfer that timed out or whose target or holder is gone. */
  sweep(): Promise<void> {
    this.sweeping ??= (async () => {
      try {
        const nowMs = this.deps.clock.nowMs();
        for (const transfer of await this.pending()) {
          if (nowMs - Date.parse(transfer.requestedAt) >= transferTimeoutMs) await this.fail(transfer, "TIMEOUT");
          else if (!(await this.deps.instances.isLive(transfer.targetInstanceId))) await this.fail(transfer, "TARGET_GONE");
          else if (!(await this.deps.instances.isLive(transfer.holderInstanceId))) await this.fail(transfer, "HOLDER_GONE");
          else if (!(await this.deps.players.get(transfer.playerUuid))) await this.fail(transfer, "PLAYER_LEFT");
        }
      } catch (err) {
        this.deps.logger.warn("Transfer sweep failed", err);
      } finally {
        this.sweeping = null;
      }
    })();
    return this.sweeping;
  }

  /** Ends a pending transfer as failed; false when it had already ended (another controller answered it). */
  async fail(transfer: Transfer, reason: TransferFailure): Promise<boolean> {
    const ended = await this.end(transfer);
    if (!ended) return false;
    const failed: Transfer = { ...transfer, state: "FAILED", failureReason: reason };
    const recipients = new Set([transfer.holderInstanceId, transfer.requestedBy]);
    for (const instanceId of recipients) await this.deps.deliveries.send({ instanceId, event: "transfer-failed", data: { ...failed } });
    this.deps.logger.info(`Transfer ${transfer.id} of ${transfer.playerUuid} to ${transfer.targetInstanceId} failed: ${reason}`);
    return true;
  }

  /**
   * Fails the transfers heading to or held by a finished instance. Instances finishing while a pass
   * runs (a group of 500 stopping) wait for the next pass, which looks at the pending transfers once
   * for all of them.
   */
  private instanceFinished(instanceId: string): Promise<void> {
    this.finishedWaiting.add(instanceId);
    this.finishedPass ??= (async () => {
      try {
        while (this.finishedWaiting.size > 0) {
          const finished = this.finishedWaiting;
          this.finishedWaiting = new Set();
          for (const transfer of await this.pending()) {
            if (finished.has(transfer.targetInstanceId)) await this.fail(transfer, "TARGET_GONE");
            else if (finished.has(transfer.holderInstanceId)) await this.fail(transfer, "HOLDER_GONE");
          }
        }
      } finally {
        this.finishedPass = null;
      }
    })();
    return this.finishedPass;
  }

  /** A player arrived on a server: the pending transfer to it completes. */
  private async arrived(player: OnlinePlayer): Promise<void> {
    const id = await this.deps.kv.get(playerTransferKey(player.uuid));
    if (id === null) return;
    const transfer = await this.get(id);
    if (!transfer || transfer.targetInstanceId !== player.instanceId) return;
    if (!(await this.end(transfer))) return;
    const completed: Transfer = { ...transfer, state: "COMPLETED" };
    await this.deps.deliveries.send({ instanceId: transfer.holderInstanceId, event: "transfer-completed", data: { ...completed } });
  }

  /** Removes a pending transfer; true for the one caller that removed it. */
  private async end(transfer: Transfer): Promise<boolean> {
    const { kv } = this.deps;
    const text = await kv.get(transferKey(transfer.id));
    if (text === null || !(await kv.compareAndDelete(transferKey(transfer.id), text))) return false;
    await kv.compareAndDelete(playerTransferKey(transfer.playerUuid), transfer.id);
    return true;
  }
}

function parseTransfer(text: string | null): Transfer | null {
  if (text === null) return null;
  try {
    return JSON.parse(text) as Transfer;
  } catch {
    return null;
  }
}

/**
 * Players first: when an instance goes DRAINING (a rollout retiring it, a DYNAMIC scale-down, a
 * drain of its node), its players are moved to RUNNING instances of its group with room, through
 * the transfer path (transfers.ts), before it stops. Its actor stops it as soon as it has no player
 * left (the EMPTY event), or at the drain timeout when some could not be moved.
 *
 * Exactly one controller does it per draining instance: the one whose instance actor entered
 * DRAINING, i.e. the owner of the group's scope. It reacts to its own INSTANCE_STATE_CHANGED
 * (never to a peer's copy, which every other controller receives through the event bridge), after
 * the record says DRAINING, so no controller picks the instance as a target any more.
 *
 * - Targets: the group's RUNNING instances other than those draining here, each taking players up
 *   to the group's `maxPlayers`: the newest deployment revision first (in a rollout the older ones
 *   retire next), then the least loaded (players on it plus transfers already heading to it), then
 *   the lowest id. A player is never sent to the server it is on. A player whose pending transfer already heads to such a target is
 *   left alone; a pending transfer heading to the draining instance is sent elsewhere (it
 *   supersedes the old one).
 * - No room: the players stay. Each instance of the group that becomes RUNNING later (a rollout's
 *   new instance, a scale-up) makes the owner try again for the group's draining instances; what
 *   is still there at the drain timeout is stopped with the instance.
 * - `requestedBy` is `drain:<instanceId>` ({@link drainRequester}).
 * - A player who leaves or moves through another controller changes the count there; that
 *   controller's scheduler does not run the draining actor, so the owner hears the peer's
 *   PLAYER_DISCONNECTED and, when the instance's roster is empty, reports the count 0 itself
 *   ({@link DrainTransfersDeps.emptied}). A move is not an event that crosses controllers
 *   (PLAYER_TRANSFER is not bridged), so the owner also reads the rosters of the instances
 *   draining here every {@link drainEmptyCheckIntervalMs}.
 * - A scope taken over mid-drain: the new owner adopts the instance in DRAINING, which no state
 *   change announces; the scheduler hands it over ({@link DrainTransfers.adopt}).
 *
 * Decisions: docs/decisions/plugin-api.md ("Drains move players"), docs/decisions/deployments.md.
 */
import { EventTypes, type InstanceStateChangedPayload, type PlayerPayload } from "../events/event-types.js";
import type { CloudEvent, EventBus, Subscription } from "../events/types.js";
import type { Logger } from "../logs/types.js";
import { KeyedMutex } from "../domain/shared/keyed-mutex.js";
import { systemClock, type Clock, type Timer } from "../shared/clock.js";
import { isProxyPlatform, type OnlinePlayer, type PlayerService } from "./players.js";
import type { Transfer, TransferService } from "./transfers.js";

/** The `requestedBy` of the transfers a drain asks for. */
export const drainRequester = (instanceId: string): string => `drain:${instanceId}`;

/** How often the owner reads the rosters of the instances draining here (moves through peers). */
export const drainEmptyCheckIntervalMs = 2_000;

/** Draining instances remembered by one controller at once (a bound; a rollout drains a batch). */
export const drainingInstancesMax = 10_000;

/** What the mover reads of instances. */
export interface DrainInstances {
  findDocs(filter: { group: string; state: "RUNNING" }): Promise<{ id: string; deploymentRevision: number }[]>;
}

/** What the mover reads of groups. */
export interface DrainGroups {
  getDoc(name: string): Promise<{ name: string; platform: string; maxPlayers: number } | null>;
}

export interface DrainTransfersDeps {
  events: EventBus;
  players: Pick<PlayerService, "playersOn" | "countOn" | "get">;
  transfers: Pick<TransferService, "request" | "pending">;
  instances: DrainInstances;
  groups: DrainGroups;
  logger: Logger;
  /** The draining instance has no player left (seen from a peer's leave): its count is 0. */
  emptied(instanceId: string): Promise<void>;
  /** Time for the roster checks; the system clock unless set. */
  clock?: Clock;
}

/** What one attempt did for one draining instance. */
export interface DrainMoveResult {
  /** Transfers requested. */
  requested: number;
  /** Players already on their way to a RUNNING instance. */
  underway: number;
  /** Players left where they are: no instance had room. */
  stayed: number;
}

/** Moves the players of instances draining on this controller; see the module comment. */
export class DrainTransfers {
  /** Instances draining here (this controller runs their actors): id → group. */
  private readonly draining = new Map<string, string>();
  /** One attempt at a time per group, so two drains of a batch do not fill one target twice. */
  private readonly groupLocks = new KeyedMutex();
  private readonly subscriptions: Subscription[] = [];
  private readonly inFlight = new Set<Promise<unknown>>();
  private emptyCheck: Timer | null = null;

  constructor(private readonly deps: DrainTransfersDeps) {}

  start(): void {
    const { events } = this.deps;
    this.subscriptions.push(
      events.subscribe(EventTypes.INSTANCE_STATE_CHANGED, (event: CloudEvent) => {
        if (isPeer(event)) return;
        this.stateChanged(event.data as InstanceStateChangedPayload);
      }),
      events.subscribe(EventTypes.PLAYER_DISCONNECTED, (event: CloudEvent) => {
        // A leave handled here already reached the scheduler through the player count.
        if (!isPeer(event)) return;
        const { instanceId } = event.data as PlayerPayload;
        if (this.draining.has(instanceId)) this.track(this.checkEmpty(instanceId));
      }),
    );
    this.emptyCheck = (this.deps.clock ?? systemClock).setInterval(
      () => {
        for (const instanceId of this.draining.keys()) this.track(this.checkEmpty(instanceId));
      },
      drainEmptyCheckIntervalMs,
      { unref: true },
    );
  }

  async stop(): Promise<void> {
    this.emptyCheck?.cancel();
    this.emptyCheck = null;
    for (const subscription of this.subscriptions.splice(0)) subscription.unsubscribe();
    await Promise.allSettled([...this.inFlight]);
    this.draining.clear();
  }

  /** Whether this controller is moving the players of `instanceId` off it. */
  isDraining(instanceId: string): boolean {
    return this.draining.has(instanceId);
  }

  /**
   * Moves the players of a draining instance (and the transfers heading to it) to RUNNING
   * instances of its group with room (called on the state changes above; one attempt per group
   * at a time).
   */
  moveOff(instanceId: string, group: string): Promise<DrainMoveResult> {
    return this.groupLocks.run(group, () => this.move(instanceId, group));
  }

  /**
   * This controller took over the scope of an instance already DRAINING (its previous owner died
   * mid-drain): the players still on it, and those whose transfer to it is pending, are moved as
   * for a drain that started here; it is reported empty once no player is left.
   */
  adopt(instanceId: string, group: string): void {
    if (!this.startDrain(instanceId, group)) return;
    this.track(this.checkEmpty(instanceId));
  }

  private startDrain(instanceId: string, group: string): boolean {
    if (!this.draining.has(instanceId) && this.draining.size >= drainingInstancesMax) {
      this.deps.logger.warn(`Drain of ${instanceId}: ${drainingInstancesMax} instances draining already; its players are not moved`);
      return false;
    }
    this.draining.set(instanceId, group);
    this.track(this.moveOff(instanceId, group));
    return true;
  }

  private stateChanged(change: InstanceStateChangedPayload): void {
    const { instanceId, group, newState } = change;
    if (newState === "DRAINING") {
      this.startDrain(instanceId, group);
    } else if (newState === "RUNNING") {
      // New room in the group: players who found none get another chance.
      for (const [id, of] of this.draining) if (of === group) this.track(this.moveOff(id, group));
    } else {
      // STOPPING, STOPPED or CRASHED: the drain is over.
      this.draining.delete(instanceId);
    }
  }

  private async move(instanceId: string, group: string): Promise<DrainMoveResult> {
    const result: DrainMoveResult = { requested: 0, underway: 0, stayed: 0 };
    const { players, transfers, instances, groups, logger } = this.deps;
    const groupDoc = await groups.getDoc(group);
    // A proxy's players are held by it: moving them to another proxy is not a transfer.
    if (!groupDoc || isProxyPlatform(groupDoc.platform)) return result;

    const pending = await transfers.pending();
    const onIt = await players.playersOn(instanceId);
    const heading = pending.filter((t) => t.targetInstanceId === instanceId);
    const headingPlayers = await Promise.all(heading.map((t) => players.get(t.playerUuid)));
    const toMove = dedupe([...onIt, ...headingPlayers.filter((p): p is OnlinePlayer => p !== null)]);
    if (toMove.length === 0) return result;

    const candidates = (await instances.findDocs({ group, state: "RUNNING" })).filter((i) => i.id !== instanceId && !this.draining.has(i.id));
    const targets = new Map<string, number>();
    const revisions = new Map(candidates.map((i) => [i.id, i.deploymentRevision]));
    await Promise.all(candidates.map(async (i) => targets.set(i.id, await players.countOn(i.id))));
    const pendingOf = new Map<string, Transfer>();
    for (const transfer of pending) {
      pendingOf.set(transfer.playerUuid, transfer);
      const load = targets.get(transfer.targetInstanceId);
      if (load !== undefined) targets.set(transfer.targetInstanceId, load + 1);
    }

    for (const player of toMove) {
      const underway = pendingOf.get(player.uuid);
      if (underway && targets.has(underway.targetInstanceId)) {
        result.underway++;
        continue;
      }
      const target = leastLoaded(targets, revisions, groupDoc.maxPlayers, player.instanceId);
      if (target === null) {
        result.stayed++;
        continue;
      }
      try {
        await transfers.request(player, target, group, drainRequester(instanceId));
        targets.set(target, targets.get(target)! + 1);
        result.requested++;
      } catch (err) {
        result.stayed++;
        logger.warn(`Drain of ${instanceId}: the transfer of ${player.uuid} to ${target} could not be queued`, err);
      }
    }
    if (result.requested > 0 || result.stayed > 0)
      logger.info(
        `Drain of ${instanceId}: ${result.requested} player(s) sent to RUNNING instances of ${group}` +
          (result.stayed > 0 ? `, ${result.stayed} stay (no instance with room; they leave with it at the drain timeout)` : ""),
      );
    return result;
  }

  private async checkEmpty(instanceId: string): Promise<void> {
    if ((await this.deps.players.countOn(instanceId)) === 0 && this.draining.has(instanceId)) await this.deps.emptied(instanceId);
  }

  private track(work: Promise<unknown>): void {
    const settled = work.then(
      () => undefined,
      (err: unknown) => this.deps.logger.warn("Moving the players of a draining instance failed", err),
    );
    this.inFlight.add(settled);
    void settled.finally(() => this.inFlight.delete(settled));
  }
}

const isPeer = (event: CloudEvent): boolean => event.source.startsWith("peer:");

/**
 * The target that still has room (never `current`): of the newest deployment revision among them
 * (during a rollout the old ones retire next, and a player sent there would move twice), then the
 * fewest players, then the lowest id. Null when none has room.
 */
function leastLoaded(loads: Map<string, number>, revisions: Map<string, number>, maxPlayers: number, current: string | null): string | null {
  let best: string | null = null;
  const rank = (id: string): [number, number] => [-(revisions.get(id) ?? 0), loads.get(id)!];
  for (const [id, load] of loads) {
    if (load >= maxPlayers || id === current) continue;
    if (best === null) {
      best = id;
      continue;
    }
    const [revision, players] = rank(id);
    const [bestRevision, bestPlayers] = rank(best);
    if (revision < bestRevision || (revision === bestRevision && (players < bestPlayers || (players === bestPlayers && id < best)))) best = id;
  }
  return best;
}

function dedupe(players: OnlinePlayer[]): OnlinePlayer[] {
  const seen = new Map<string, OnlinePlayer>();
  for (const player of players) if (!seen.has(player.uuid)) seen.set(player.uuid, player);
  return [...seen.values()].sort((a, b) => (a.uuid < b.uuid ? -1 : a.uuid > b.uuid ? 1 : 0));
}

/**
 * The cluster-wide player registry: who is online, on which instance and which proxy, since when.
 * It lives in the key-value store (Redis on production, memory on development), so every controller
 * reads and writes the same registry and a player survives the controller that recorded it:
 *
 * - `cloud:v1:player:<uuid>`: the player ({@link PlayerRecord}); changed only by compare-and-set;
 * - `cloud:v1:roster:<instanceId>`: the players on one instance (a backend server, or a proxy) with
 *   the group, so listing the network costs one read per instance, and an instance's count is the
 *   size of its roster.
 *
 * The in-server plugins report joins and leaves (`/api/plugin/player-join`, `/player-leave`). A
 * join on a proxy sets the player's proxy; a join on a server sets its instance (a join on another
 * server is a move: PLAYER_TRANSFER). A leave from the proxy takes the player off the network. A
 * finished instance takes its players with it. The counts feed `playerCount`, the group aggregates
 * and DYNAMIC scaling through {@link PlayerCountListener}; PLAYER_CONNECTED, PLAYER_DISCONNECTED,
 * PLAYER_TRANSFER and PLAYER_JOURNEY are published on the bus (docs/decisions/plugin-api.md).
 *
 * The registry has an epoch (`cloud:v1:players:epoch`, a random id written once, no expiry): a
 * store that lost its data (the development profile's memory store after a restart, a flushed
 * Redis) gets a new one. Plugins are told it on their event stream and report their players again
 * when it changed, so a lost registry fills itself again.
 */
import { randomUUID } from "node:crypto";
import type { Clock, Timer } from "../shared/clock.js";
import { EventTypes, type InstanceStateChangedPayload, type PlayerPayload, type PlayerTransferPayload } from "../events/event-types.js";
import type { CloudEvent, EventBus, Subscription } from "../events/types.js";
import type { KvStore } from "../store/ports.js";
import { KV_KEY_PREFIX } from "../coordination/keys.js";
import { isoFromMs } from "../domain/shared/time.js";
import type { Logger } from "../logs/types.js";

/** `cloud:v1:player:<uuid>`: one online player. */
export const playerKey = (uuid: string): string => `${KV_KEY_PREFIX}player:${uuid}`;
/** Prefix of every roster key. */
export const ROSTER_KEY_PREFIX = `${KV_KEY_PREFIX}roster:`;
/** `cloud:v1:roster:<instanceId>`: the players on one instance. */
export const rosterKey = (instanceId: string): string => `${ROSTER_KEY_PREFIX}${instanceId}`;

/** `cloud:v1:players:epoch`: the registry's epoch; a new one means the registry was lost. */
export const PLAYER_REGISTRY_EPOCH_KEY = `${KV_KEY_PREFIX}players:epoch`;
/** After a new epoch (or a start), how long a missing roster means "not reported again yet" rather than "nobody". */
export const registrySettleMs = 30_000;
/** How often each controller reads the epoch, so a store flushed while it runs is noticed without a reconnect. */
export const registryEpochCheckIntervalMs = 5_000;

/** Told the registry's new epoch when this controller finds it changed. */
export type RegistryEpochListener = (epoch: string) => void;

/** Compare-and-set attempts of one update before it gives up (contention beyond it is a bug or an attack). */
export const registryUpdateAttemptsMax = 64;

/**
 * Platforms whose instances are proxies: a player joining one connects to the network through it,
 * and transfers are delivered to it. `simulated-proxy` is the simulated server acting as a proxy.
 */
export const PROXY_PLATFORMS: ReadonlySet<string> = new Set(["velocity", "bungeecord", "waterfall", "simulated-proxy"]);

/** Whether instances of a group on `platform` are proxies. */
export const isProxyPlatform = (platform: string): boolean => PROXY_PLATFORMS.has(platform.toLowerCase());

/** A player online, as the registry keeps it and `GET /api/plugin/players` lists it. */
export interface OnlinePlayer {
  uuid: string;
  name: string;
  /** The game server the player is on; null while only on a proxy. */
  instanceId: string | null;
  /** The group of `instanceId`; null while only on a proxy. */
  group: string | null;
  /** The proxy holding the player's connection; null when the player joined a server directly. */
  proxyInstanceId: string | null;
  /** When the player came onto the network (ISO 8601). */
  connectedAt: string;
  /** When the player arrived on `instanceId` (ISO 8601); null while only on a proxy. */
  instanceSince: string | null;
}

type PlayerRecord = OnlinePlayer;

interface RosterEntry {
  name: string;
  since: string;
}

interface Roster {
  group: string;
  proxy: boolean;
  players: Record<string, RosterEntry>;
}

/** The instance a plugin call comes from. */
export interface PlayerInstance {
  instanceId: string;
  group: string;
  /** Whether the instance is a proxy ({@link isProxyPlatform} of its group's platform). */
  proxy: boolean;
}

/** Told the new player count of each instance whose players changed. */
export type PlayerCountListener = (instanceId: string, playerCount: number) => Promise<void> | void;

/** Told that a player arrived on a server (transfers complete on it). */
export type PlayerArrivalListener = (player: OnlinePlayer) => Promise<void> | void;

/** One step of a player's way through the network (the `entry` of PLAYER_JOURNEY). */
export type JourneyEntry = {
  uuid: string;
  name: string;
  action: "CONNECTED" | "JOINED" | "TRANSFERRED" | "LEFT" | "DISCONNECTED";
  instanceId: string | null;
  group: string | null;
  fromInstanceId: string | null;
  proxyInstanceId: string | null;
  at: string;
};

/** The registry; see the module comment. */
export class PlayerService {
  private subscription: Subscription | null = null;
  private readonly arrivals: PlayerArrivalListener[] = [];
  private readonly epochListeners = new Set<RegistryEpochListener>();
  private epochTimer: Timer | null = null;
  private knownEpoch: string | null = null;
  /** When this controller first read the current epoch (ms); rosters missing this long after it mean nobody. */
  private epochSeenAtMs: number | null = null;
  private epochCheck: Promise<string> | null = null;

  constructor(
    private readonly kv: KvStore,
    private readonly events: EventBus,
    private readonly clock: Clock,
    private readonly countChanged: PlayerCountListener,
    private readonly logger?: Logger,
  ) {}

  /**
   * Makes sure the registry has an epoch, then drops the players of instances that finished (the
   * controller that published the change does it) and re-reads the epoch every
   * {@link registryEpochCheckIntervalMs}.
   */
  async start(): Promise<void> {
    await this.epoch();
    this.epochTimer ??= this.clock.setInterval(
      () => void this.epoch().catch((err: unknown) => this.logger?.warn("Reading the player registry's epoch failed", err)),
      registryEpochCheckIntervalMs,
      { unref: true },
    );
    this.subscription = this.events.subscribe(EventTypes.INSTANCE_STATE_CHANGED, async (event: CloudEvent) => {
      if (event.source.startsWith("peer:")) return;
      const data = event.data as InstanceStateChangedPayload;
      if (data.newState === "STOPPED" || data.newState === "CRASHED") await this.instanceFinished(data.instanceId);
    });
  }

  stop(): void {
    this.subscription?.unsubscribe();
    this.epochTimer?.cancel();
    this.epochTimer = null;
  }

  /**
   * The registry's epoch, read from the store (one read); a missing key (the store lost its data) is
   * created with a fresh id first (`setIfAbsent`: controllers finding it missing at once agree on
   * one). Listeners hear of an epoch other than the last one this controller saw.
   */
  epoch(): Promise<string> {
    this.epochCheck ??= this.readEpoch().finally(() => (this.epochCheck = null));
    return this.epochCheck;
  }

  /** Calls `listener` with the new epoch whenever this controller finds the registry's epoch changed; returns the function that stops it. */
  onEpochChange(listener: RegistryEpochListener): () => void {
    this.epochListeners.add(listener);
    return () => this.epochListeners.delete(listener);
  }

  private async readEpoch(): Promise<string> {
    let epoch = await this.kv.get(PLAYER_REGISTRY_EPOCH_KEY);
    for (let attempt = 0; epoch === null && attempt < registryUpdateAttemptsMax; attempt++) {
      await this.kv.setIfAbsent(PLAYER_REGISTRY_EPOCH_KEY, randomUUID());
      epoch = await this.kv.get(PLAYER_REGISTRY_EPOCH_KEY);
    }
    if (epoch === null) throw new Error(`player registry epoch: deleted ${registryUpdateAttemptsMax} times in a row`);
    const previous = this.knownEpoch;
    if (epoch !== previous) this.epochSeenAtMs = this.clock.nowMs();
    this.knownEpoch = epoch;
    if (previous !== null && previous !== epoch) {
      this.logger?.warn(`The player registry's epoch changed (${previous} -> ${epoch}): the store lost the registry; plugins report their players again`);
      for (const listener of [...this.epochListeners]) listener(epoch);
    }
    return epoch;
  }

  /** Calls `listener` whenever a player arrives on a server. */
  onArrival(listener: PlayerArrivalListener): void {
    this.arrivals.push(listener);
  }

  /** A player joined `instance`. Returns the instance's new count. */
  async join(instance: PlayerInstance, uuid: string, name: string): Promise<number> {
    const now = isoFromMs(this.clock.nowMs());
    const [previous, next] = await this.updatePlayer(uuid, (current) => {
      if (instance.proxy) {
        return current
          ? { ...current, name, proxyInstanceId: instance.instanceId }
          : { uuid, name, instanceId: null, group: null, proxyInstanceId: instance.instanceId, connectedAt: now, instanceSince: null };
      }
      if (current?.instanceId === instance.instanceId) return { ...current, name };
      return current
        ? { ...current, name, instanceId: instance.instanceId, group: instance.group, instanceSince: now }
        : { uuid, name, instanceId: instance.instanceId, group: instance.group, proxyInstanceId: null, connectedAt: now, instanceSince: now };
    });
    assertPresent(next);
    const count = await this.updateRoster(instance.instanceId, instance, (players) => {
      players[uuid] = { name, since: players[uuid]?.since ?? now };
    });
    await this.countChanged(instance.instanceId, count);

    if (instance.proxy) {
      const moved = previous?.proxyInstanceId && previous.proxyInstanceId !== instance.instanceId ? previous.proxyInstanceId : null;
      if (moved) await this.dropFromRoster(moved, uuid);
      if (!previous || moved) {
        this.publishPresence(EventTypes.PLAYER_CONNECTED, next, instance.instanceId, instance.group);
        this.journey(next, previous ? "TRANSFERRED" : "CONNECTED", instance.instanceId, instance.group, moved);
      }
      return count;
    }

    const from = previous?.instanceId && previous.instanceId !== instance.instanceId ? previous.instanceId : null;
    if (from) {
      await this.dropFromRoster(from, uuid);
      this.publishPresence(EventTypes.PLAYER_DISCONNECTED, next, from, previous?.group ?? "");
      this.events.publish(EventTypes.PLAYER_TRANSFER, { uuid, name, fromInstanceId: from, toInstanceId: instance.instanceId } satisfies PlayerTransferPayload);
    }
    if (previous?.instanceId !== instance.instanceId) {
      this.publishPresence(EventTypes.PLAYER_CONNECTED, next, instance.instanceId, instance.group);
      this.journey(next, from ? "TRANSFERRED" : previous ? "JOINED" : "CONNECTED", instance.instanceId, instance.group, from);
      for (const listener of this.arrivals) await listener(next);
    }
    return count;
  }

  /**
   * A player left `instanceId`. Leaving the proxy is leaving the network (the server the player
   * was on loses the player too). False when the player was not there.
   */
  async leave(instanceId: string, uuid: string): Promise<boolean> {
    let left = false;
    let fromProxy = false;
    const [previous] = await this.updatePlayer(uuid, (current) => {
      left = false;
      fromProxy = false;
      if (!current) return null;
      if (current.proxyInstanceId === instanceId) {
        left = true;
        fromProxy = true;
        return null;
      }
      if (current.instanceId !== instanceId) return current;
      left = true;
      return current.proxyInstanceId ? { ...current, instanceId: null, group: null, instanceSince: null } : null;
    });
    if (!left || !previous) return false;
    await this.dropFromRoster(instanceId, uuid);
    if (fromProxy) {
      if (previous.instanceId) {
        await this.dropFromRoster(previous.instanceId, uuid);
        this.publishPresence(EventTypes.PLAYER_DISCONNECTED, previous, previous.instanceId, previous.group ?? "");
      }
      this.publishPresence(EventTypes.PLAYER_DISCONNECTED, previous, instanceId, "");
      this.journey(previous, "DISCONNECTED", null, null, instanceId);
      return true;
    }
    this.publishPresence(EventTypes.PLAYER_DISCONNECTED, previous, instanceId, previous.group ?? "");
    this.journey(previous, previous.proxyInstanceId ? "LEFT" : "DISCONNECTED", null, null, instanceId);
    return true;
  }

  /** One player, or null when offline. */
  async get(uuid: string): Promise<OnlinePlayer | null> {
    return parseRecord(await this.kv.get(playerKey(uuid)));
  }

  /** Players online across the network (one read per instance), ordered by UUID. */
  async list(): Promise<OnlinePlayer[]> {
    const rosters = await this.rosters();
    const byUuid = new Map<string, OnlinePlayer>();
    for (const [instanceId, roster] of rosters) {
      for (const [uuid, entry] of Object.entries(roster.players)) {
        const player = byUuid.get(uuid) ?? {
          uuid,
          name: entry.name,
          instanceId: null,
          group: null,
          proxyInstanceId: null,
          connectedAt: entry.since,
          instanceSince: null,
        };
        if (roster.proxy) {
          player.proxyInstanceId = instanceId;
          if (entry.since < player.connectedAt) player.connectedAt = entry.since;
        } else {
          player.instanceId = instanceId;
          player.group = roster.group;
          player.instanceSince = entry.since;
          if (!player.proxyInstanceId && entry.since < player.connectedAt) player.connectedAt = entry.since;
        }
        byUuid.set(uuid, player);
      }
    }
    return [...byUuid.values()].sort((a, b) => (a.uuid < b.uuid ? -1 : a.uuid > b.uuid ? 1 : 0));
  }

  /** Distinct players online (the overview's `playerCount` and `cloud_players_total`). */
  async onlineCount(): Promise<number> {
    const uuids = new Set<string>();
    for (const [, roster] of await this.rosters()) for (const uuid of Object.keys(roster.players)) uuids.add(uuid);
    return uuids.size;
  }

  /** Players on one instance (the size of its roster). */
  async countOn(instanceId: string): Promise<number> {
    return (await this.knownCountOn(instanceId)) ?? 0;
  }

  /**
   * The players on one server, or null while that is unknown: no roster of it, and the registry's
   * epoch is younger than {@link registrySettleMs} here (the registry was just lost — the
   * development profile's in-memory store after a restart — and the plugins are still reporting
   * their players again). A roster still missing after that means nobody is on it.
   */
  async knownCountOn(instanceId: string): Promise<number | null> {
    const roster = parseRoster(await this.kv.get(rosterKey(instanceId)));
    if (roster) return Object.keys(roster.players).length;
    const settled = this.epochSeenAtMs !== null && this.clock.nowMs() - this.epochSeenAtMs >= registrySettleMs;
    return settled ? 0 : null;
  }

  /**
   * The players on one server (its roster), as the registry has them: one read per player. A
   * player whose record says another server by now (a move under way) is left out.
   */
  async playersOn(instanceId: string): Promise<OnlinePlayer[]> {
    const roster = parseRoster(await this.kv.get(rosterKey(instanceId)));
    if (!roster || roster.proxy) return [];
    const records = await Promise.all(Object.keys(roster.players).map((uuid) => this.get(uuid)));
    return records.filter((p): p is OnlinePlayer => p !== null && p.instanceId === instanceId);
  }

  /** Players per group on servers (proxies not counted). */
  async countsByGroup(): Promise<Map<string, number>> {
    const counts = new Map<string, number>();
    for (const [, roster] of await this.rosters()) {
      if (roster.proxy) continue;
      counts.set(roster.group, (counts.get(roster.group) ?? 0) + Object.keys(roster.players).length);
    }
    return counts;
  }

  /** An instance finished: its roster is taken (by one controller) and its players leave it. */
  async instanceFinished(instanceId: string): Promise<void> {
    const roster = parseRoster(await this.kv.take(rosterKey(instanceId)));
    if (!roster) return;
    for (const uuid of Object.keys(roster.players)) {
      try {
        await this.leave(instanceId, uuid);
      } catch (err) {
        this.logger?.warn(`Removing player ${uuid} of finished instance ${instanceId} failed`, err);
      }
    }
  }

  private async rosters(): Promise<[string, Roster][]> {
    const keys = await this.kv.keys(ROSTER_KEY_PREFIX);
    const values = await Promise.all(keys.map((key) => this.kv.get(key)));
    const out: [string, Roster][] = [];
    keys.forEach((key, i) => {
      const roster = parseRoster(values[i]);
      if (roster) out.push([key.slice(ROSTER_KEY_PREFIX.length), roster]);
    });
    return out;
  }

  /** Compare-and-set loop on a player; `change` returns the next record (null deletes). Returns [before, after]. */
  private async updatePlayer(uuid: string, change: (current: PlayerRecord | null) => PlayerRecord | null): Promise<[PlayerRecord | null, PlayerRecord | null]> {
    const key = playerKey(uuid);
    for (let attempt = 0; attempt < registryUpdateAttemptsMax; attempt++) {
      const text = await this.kv.get(key);
      const current = parseRecord(text);
      const next = change(current);
      if (next === current) return [current, next];
      const nextText = next ? JSON.stringify(next) : null;
      let written: boolean;
      if (text === null) written = nextText === null ? true : await this.kv.setIfAbsent(key, nextText);
      else written = nextText === null ? await this.kv.compareAndDelete(key, text) : await this.kv.compareAndSet(key, text, nextText);
      if (written) return [current, next];
    }
    throw new Error(`player ${uuid}: ${registryUpdateAttemptsMax} concurrent updates in a row`);
  }

  /** Compare-and-set loop on a roster; returns the roster's new size. An emptied roster stays (see {@link knownCountOn}). */
  private async updateRoster(
    instanceId: string,
    instance: { group: string; proxy: boolean } | null,
    change: (players: Record<string, RosterEntry>) => void,
  ): Promise<number> {
    const key = rosterKey(instanceId);
    for (let attempt = 0; attempt < registryUpdateAttemptsMax; attempt++) {
      const text = await this.kv.get(key);
      const current = parseRoster(text);
      if (!current && !instance) return 0;
      const next: Roster = current ? { ...current, players: { ...current.players } } : { group: instance!.group, proxy: instance!.proxy, players: {} };
      change(next.players);
      const size = Object.keys(next.players).length;
      let written: boolean;
      // An emptied roster is kept (removed when the instance finishes): "no roster" then means the registry does not know the instance.
      if (text === null) written = size === 0 ? true : await this.kv.setIfAbsent(key, JSON.stringify(next));
      else written = await this.kv.compareAndSet(key, text, JSON.stringify(next));
      if (written) return size;
    }
    throw new Error(`roster of ${instanceId}: ${registryUpdateAttemptsMax} concurrent updates in a row`);
  }

  private async dropFromRoster(instanceId: string, uuid: string): Promise<void> {
    const count = await this.updateRoster(instanceId, null, (players) => {
      delete players[uuid];
    });
    await this.countChanged(instanceId, count);
  }

  private publishPresence(type: string, player: PlayerRecord, instanceId: string, group: string): void {
    this.events.publish(type, { uuid: player.uuid, name: player.name, instanceId, group } satisfies PlayerPayload);
  }

  private journey(player: PlayerRecord, action: JourneyEntry["action"], instanceId: string | null, group: string | null, fromInstanceId: string | null): void {
    const entry: JourneyEntry = {
      uuid: player.uuid,
      name: player.name,
      action,
      instanceId,
      group,
      fromInstanceId,
      proxyInstanceId: player.proxyInstanceId,
      at: isoFromMs(this.clock.nowMs()),
    };
    this.events.publish(EventTypes.PLAYER_JOURNEY, { entry });
  }
}

function assertPresent<T>(value: T | null): asserts value is T {
  if (value === null) throw new Error("player update produced no record");
}

function parseRecord(text: string | null): PlayerRecord | null {
  if (text === null) return null;
  try {
    return JSON.parse(text) as PlayerRecord;
  } catch {
    return null;
  }
}

function parseRoster(text: string | null): Roster | null {
  if (text === null) return null;
  try {
    const roster = JSON.parse(text) as Roster;
    return roster && typeof roster.players === "object" ? roster : null;
  } catch {
    return null;
  }
}

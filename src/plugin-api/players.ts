/**
 * Players online across the network, as the in-server plugins report them (`/api/plugin/player-join`
 * and `/player-leave`). One document per player (collection `players`, keyed by UUID); a join on
 * another instance moves the player. The count per instance feeds `playerCount`, the group
 * aggregates and DYNAMIC scaling; a finished instance takes its players with it.
 */
import type { Clock } from "../shared/clock.js";
import { EventTypes, type InstanceStateChangedPayload, type PlayerPayload } from "../events/event-types.js";
import type { EventBus, Subscription } from "../events/types.js";
import type { Collection, Doc, DocumentStore } from "../store/ports.js";
import { isoFromMs } from "../domain/shared/time.js";

/** Collection owned by {@link PlayerService}. */
export const PLAYERS_COLLECTION = "players";

interface StoredPlayer extends Doc {
  uuid: string;
  name: string;
  instanceId: string;
  group: string;
  joinedAt: string;
}

/** A player online. */
export interface OnlinePlayer {
  uuid: string;
  name: string;
  instanceId: string;
  group: string;
  joinedAt: string;
}

/** Told the new player count of each instance whose players changed. */
export type PlayerCountListener = (instanceId: string, playerCount: number) => Promise<void> | void;

/** Tracks online players. */
export class PlayerService {
  private readonly players: Collection<StoredPlayer>;
  private subscription: Subscription | null = null;

  constructor(
    store: DocumentStore,
    private readonly events: EventBus,
    private readonly clock: Clock,
    private readonly countChanged: PlayerCountListener,
  ) {
    this.players = store.collection<StoredPlayer>(PLAYERS_COLLECTION, { indexes: [{ name: "players_instance", field: "instanceId" }] });
  }

  /** Drops the players of instances that finished. */
  start(): void {
    this.subscription = this.events.subscribe(EventTypes.INSTANCE_STATE_CHANGED, async (event) => {
      const data = event.data as InstanceStateChangedPayload;
      if (data.newState === "STOPPED" || data.newState === "CRASHED") await this.players.deleteMany({ instanceId: data.instanceId });
    });
  }

  stop(): void {
    this.subscription?.unsubscribe();
  }

  /** A player joined `instance`; publishes PLAYER_CONNECTED. Returns the instance's new count. */
  async join(instance: { instanceId: string; group: string }, uuid: string, name: string): Promise<number> {
    const previous = await this.players.get(uuid);
    await this.players.put({ _id: uuid, uuid, name, instanceId: instance.instanceId, group: instance.group, joinedAt: isoFromMs(this.clock.nowMs()) });
    if (previous && previous.instanceId !== instance.instanceId) {
      this.publish(EventTypes.PLAYER_DISCONNECTED, previous);
      await this.countChanged(previous.instanceId, await this.countOn(previous.instanceId));
    }
    this.events.publish(EventTypes.PLAYER_CONNECTED, { uuid, name, instanceId: instance.instanceId, group: instance.group } satisfies PlayerPayload);
    const count = await this.countOn(instance.instanceId);
    await this.countChanged(instance.instanceId, count);
    return count;
  }

  /** A player left `instanceId`; publishes PLAYER_DISCONNECTED. False when the player was not there. */
  async leave(instanceId: string, uuid: string): Promise<boolean> {
    const previous = await this.players.get(uuid);
    if (!previous || previous.instanceId !== instanceId) return false;
    await this.players.delete(uuid);
    this.publish(EventTypes.PLAYER_DISCONNECTED, previous);
    await this.countChanged(instanceId, await this.countOn(instanceId));
    return true;
  }

  /** Players online, optionally on one instance. */
  async list(instanceId?: string): Promise<OnlinePlayer[]> {
    const docs = await this.players.find(instanceId ? { instanceId } : {});
    return docs.map(({ uuid, name, instanceId: on, group, joinedAt }) => ({ uuid, name, instanceId: on, group, joinedAt }));
  }

  private countOn(instanceId: string): Promise<number> {
    return this.players.count({ instanceId });
  }

  private publish(type: string, player: StoredPlayer): void {
    this.events.publish(type, { uuid: player.uuid, name: player.name, instanceId: player.instanceId, group: player.group } satisfies PlayerPayload);
  }
}

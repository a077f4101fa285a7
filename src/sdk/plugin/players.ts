/**
 * PlayerManager and CloudPlayer (spec document 3, "Plugin-side objects"): the players of the whole
 * network as this plugin knows them. `refresh()` loads them from `GET /api/plugin/players`; player
 * events from the event stream keep the view current (a RESYNC_REQUIRED loads it again).
 * Messages and kicks reach a player only through the server it is connected to: the platform
 * supplies them (PlayerConnections); the control plane relays neither.
 */
import { normalizePlayerView, type CloudClient } from "./cloud-client.js";
import { RESYNC_REQUIRED, type PluginEventBus, type Subscription } from "./event-bus.js";
import type { PlayerPayload } from "../contracts/plugin-events.js";
import type { CloudEvent, PlayerView } from "./types.js";

/** How this server reaches the players connected to it (chat messages, kicks). */
export interface PlayerConnections {
  /** False when the player is not connected here. */
  sendMessage(uuid: string, text: string): boolean;
  kick(uuid: string, reason: string): boolean;
}

const notConnectedHere: PlayerConnections = { sendMessage: () => false, kick: () => false };
const UUID_TEXT = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
/** Players one manager keeps at most (a network's worth; the registry is the source of truth). */
export const playersKnownMax = 100_000;

export class CloudPlayer {
  constructor(
    private readonly view: PlayerView,
    private readonly client: Pick<CloudClient, "transferPlayer" | "transferPlayerTo">,
    private readonly connections: PlayerConnections,
  ) {}

  uniqueId(): string {
    return this.view.uuid;
  }

  name(): string {
    return this.view.name;
  }

  currentInstanceId(): string {
    return this.view.instanceId;
  }

  currentGroup(): string {
    return this.view.group;
  }

  toView(): PlayerView {
    return this.view;
  }

  /** True when delivered (the player is connected to this server). */
  sendMessage(text: string): boolean {
    return this.connections.sendMessage(this.view.uuid, text);
  }

  /** True once the controller queued the move (not on arrival); no permission check here. */
  async transfer(targetGroup: string): Promise<boolean> {
    return (await this.client.transferPlayer(this.view.uuid, targetGroup)).success;
  }

  /** True once the controller queued the move (not on arrival). */
  async transferTo(targetInstanceId: string): Promise<boolean> {
    return (await this.client.transferPlayerTo(this.view.uuid, targetInstanceId)).success;
  }

  /** True when the player was connected here and is kicked. */
  kick(reason: string): boolean {
    return this.connections.kick(this.view.uuid, reason);
  }
}

/** A player connected to this instance, as the platform reported it. */
export interface LocalPlayer {
  uuid: string;
  name: string;
}

export class PlayerManager {
  private readonly byUuid = new Map<string, PlayerView>();
  /** The players this instance holds (trackLocalJoin until trackLocalLeave), whatever the network view says. */
  private readonly local = new Map<string, LocalPlayer>();
  private readonly subscriptions: Subscription[] = [];
  private connections: PlayerConnections = notConnectedHere;

  constructor(private readonly client: CloudClient) {}

  /** Lets CloudPlayer.sendMessage and kick reach the players connected to this server. */
  setConnections(connections: PlayerConnections): void {
    this.connections = connections;
  }

  /** A player by UUID (any case) or by name (case-insensitive), if online. */
  getPlayer(uuidOrName: string): CloudPlayer | undefined {
    let view: PlayerView | undefined;
    if (UUID_TEXT.test(uuidOrName)) view = this.byUuid.get(uuidOrName.toLowerCase());
    else {
      const wanted = uuidOrName.toLowerCase();
      for (const candidate of this.byUuid.values()) if (candidate.name.toLowerCase() === wanted) view = candidate;
    }
    return view && this.wrap(view);
  }

  /** A snapshot of every online player. */
  onlinePlayers(): CloudPlayer[] {
    return [...this.byUuid.values()].map((view) => this.wrap(view));
  }

  onlineCount(): number {
    return this.byUuid.size;
  }

  /** Replaces the view with the controller's list (`GET /api/plugin/players`). */
  async refresh(): Promise<void> {
    const players = await this.client.fetchPlayers();
    this.byUuid.clear();
    for (const view of players.slice(0, playersKnownMax)) this.byUuid.set(view.uuid, view);
  }

  /**
   * The players connected to this instance (a proxy: those it holds; a server: those on it), from
   * trackLocalJoin until trackLocalLeave. They are reported again when the registry was lost.
   */
  localPlayers(): LocalPlayer[] {
    return [...this.local.values()];
  }

  /** Whether the player (UUID, any case) is connected to this instance. */
  isLocal(uuid: string): boolean {
    return this.local.has(uuid.toLowerCase());
  }

  /**
   * Records a player connected to this instance (the platform saw the login). Call it with every
   * player the instance takes, and trackLocalLeave when it goes (a leave, or handed to another
   * server): these are the players reported again when the registry was lost.
   */
  trackLocalJoin(uuid: string, name: string, proxyInstanceId: string | null = null): PlayerView {
    const view = normalizePlayerView({
      uuid,
      name,
      instanceId: this.client.instanceId(),
      group: this.client.group(),
      proxyInstanceId,
      connectedAt: new Date().toISOString(),
    });
    this.remember(view);
    if (this.local.has(view.uuid) || this.local.size < playersKnownMax) this.local.set(view.uuid, { uuid: view.uuid, name });
    return view;
  }

  /** The player is no longer connected to this instance (it left, or moved to another server). */
  trackLocalLeave(uuid: string): void {
    this.local.delete(uuid.toLowerCase());
    const known = this.byUuid.get(uuid.toLowerCase());
    if (known && known.instanceId === this.client.instanceId()) this.byUuid.delete(known.uuid);
  }

  /** Keeps the view current from the bus: player events, and a full reload after RESYNC_REQUIRED. */
  follow(bus: PluginEventBus, onReloadFailed: (error: Error) => void = () => {}): void {
    this.subscriptions.push(
      bus.subscribe("PLAYER_CONNECTED", (event) => this.connected(event)),
      bus.subscribe("PLAYER_DISCONNECTED", (event) => this.disconnected(event)),
      bus.subscribe(RESYNC_REQUIRED, () => void this.refresh().catch(onReloadFailed)),
    );
  }

  unfollow(): void {
    for (const subscription of this.subscriptions.splice(0)) subscription.unsubscribe();
  }

  private connected(event: CloudEvent): void {
    // The spec's payload has no proxy id or join time: a controller's are taken, else the proxy this
    // instance knew and the event's time.
    const data = event.data as Partial<PlayerPayload> & Partial<Pick<PlayerView, "proxyInstanceId" | "connectedAt">>;
    if (typeof data.uuid !== "string") return;
    const previous = this.byUuid.get(data.uuid.toLowerCase());
    this.remember(
      normalizePlayerView({
        ...data,
        proxyInstanceId: data.proxyInstanceId ?? previous?.proxyInstanceId ?? null,
        connectedAt: data.connectedAt ?? event.timestamp,
      }),
    );
  }

  private disconnected(event: CloudEvent): void {
    const data = event.data as Partial<PlayerPayload>;
    if (typeof data.uuid !== "string") return;
    const known = this.byUuid.get(data.uuid.toLowerCase());
    // A move publishes DISCONNECTED for the old instance: a record already on the new one stays.
    if (known && (data.instanceId === undefined || known.instanceId === data.instanceId)) this.byUuid.delete(known.uuid);
  }

  private remember(view: PlayerView): void {
    if (!this.byUuid.has(view.uuid) && this.byUuid.size >= playersKnownMax) return;
    this.byUuid.set(view.uuid, view);
  }

  private wrap(view: PlayerView): CloudPlayer {
    return new CloudPlayer(view, this.client, this.connections);
  }
}

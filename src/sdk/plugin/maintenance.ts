/**
 * What a plugin knows of maintenance: the global switch and its message, and whether its own
 * group is in maintenance. Loaded from `GET /api/plugin/maintenance`, kept current by the event
 * stream (MAINTENANCE_UPDATED {globalEnabled, message}; GROUP_MAINTENANCE_CHANGED of its group) and
 * loaded again after a RESYNC_REQUIRED. The controller decides each join (`CloudClient.admitPlayer`);
 * this view is for what a proxy shows (a server list's message of the day, a warning to staff).
 */
import { MAINTENANCE_EVENT_TYPES, type GroupMaintenanceChangedPayload, type MaintenanceUpdatedPayload } from "../contracts/plugin-events.js";
import type { CloudClient } from "./cloud-client.js";
import { RESYNC_REQUIRED, type PluginEventBus, type Subscription } from "./event-bus.js";
import type { CloudEvent, PluginMaintenance } from "./types.js";

export { MAINTENANCE_EVENT_TYPES };

/** Told the new view whenever it changed. */
export type MaintenanceListener = (state: Readonly<PluginMaintenance>) => void;

export class MaintenanceState {
  private state: PluginMaintenance = { globalEnabled: false, message: null, groupMaintenance: false };
  private readonly listeners = new Set<MaintenanceListener>();
  private subscriptions: Subscription[] = [];

  constructor(
    private readonly client: Pick<CloudClient, "fetchMaintenance" | "group">,
    private readonly onReloadFailed: (error: Error) => void = () => {},
  ) {}

  /** The current view (a copy). */
  current(): Readonly<PluginMaintenance> {
    return { ...this.state };
  }

  /** Whether the network is in maintenance (new players need to be allowed). */
  globalEnabled(): boolean {
    return this.state.globalEnabled;
  }

  /** The operator's message for refused players; null when none was set. */
  message(): string | null {
    return this.state.message;
  }

  /** Calls `listener` on every change; returns the function that stops it. */
  onChange(listener: MaintenanceListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Loads the view from the controller. */
  async refresh(): Promise<Readonly<PluginMaintenance>> {
    this.set(await this.client.fetchMaintenance());
    return this.current();
  }

  /** Follows the bus: the maintenance events, and a reload after RESYNC_REQUIRED. */
  follow(bus: PluginEventBus): void {
    this.unfollow();
    this.subscriptions = [
      bus.subscribe("MAINTENANCE_UPDATED", (event) => this.onGlobal(event)),
      bus.subscribe("GROUP_MAINTENANCE_CHANGED", (event) => this.onGroup(event)),
      bus.subscribe(RESYNC_REQUIRED, () => void this.refresh().catch((error: Error) => this.onReloadFailed(error))),
    ];
  }

  unfollow(): void {
    for (const subscription of this.subscriptions) subscription.unsubscribe();
    this.subscriptions = [];
  }

  private onGlobal(event: CloudEvent): void {
    const data = event.data as Partial<MaintenanceUpdatedPayload>;
    this.set({ ...this.state, globalEnabled: data.globalEnabled === true, message: typeof data.message === "string" ? data.message : null });
  }

  private onGroup(event: CloudEvent): void {
    const data = event.data as Partial<GroupMaintenanceChangedPayload>;
    if (data.groupName !== this.client.group()) return;
    this.set({ ...this.state, groupMaintenance: data.maintenance === true });
  }

  private set(next: PluginMaintenance): void {
    const changed =
      next.globalEnabled !== this.state.globalEnabled || next.message !== this.state.message || next.groupMaintenance !== this.state.groupMaintenance;
    this.state = { globalEnabled: next.globalEnabled === true, message: next.message ?? null, groupMaintenance: next.groupMaintenance === true };
    if (changed) for (const listener of [...this.listeners]) listener(this.current());
  }
}

/**
 * Global maintenance: one document (`maintenance`, `_id` "global") in the shared document store,
 * changed under the cluster-wide record lock by any controller, so that an operator can switch the
 * network into maintenance even while the Raft quorum is lost (the moment it is most needed).
 * Every change publishes MAINTENANCE_UPDATED {globalEnabled, message} once, on the controller that
 * wrote it; the event journal carries it to every stream (plugins included).
 *
 * Reads for player admissions are cached for {@link maintenanceCacheMs} on the injected clock: a
 * switch made through another controller is honoured by this one's admissions within that bound
 * (this controller's own writes at once).
 */
import type { Clock } from "../../shared/clock.js";
import { EventTypes, type MaintenanceUpdatedPayload } from "../../events/event-types.js";
import type { EventBus } from "../../events/types.js";
import type { Collection, Doc, DocumentStore } from "../../store/ports.js";
import { KeyedMutex, type KeyedLock } from "../shared/keyed-mutex.js";
import { isoFromMs } from "../shared/time.js";
import { checkSchema } from "../shared/validate.js";
import { MaintenancePatchSchema, type Maintenance, type MaintenancePatch } from "./maintenance-schemas.js";

/** Collection owned by {@link MaintenanceService}. */
export const MAINTENANCE_COLLECTION = "maintenance";
/** The one document of the collection. */
const GLOBAL_ID = "global";
/** How long an admission reuses a read of the maintenance record. */
export const maintenanceCacheMs = 1_000;
/** The permission whose holders' linked Minecraft accounts are admitted during maintenance. */
export const MAINTENANCE_BYPASS_PERMISSION = "maintenance.bypass";

interface StoredMaintenance extends Doc {
  enabled: boolean;
  message: string | null;
  allowedPlayers: string[];
  updatedAt: string | null;
  updatedBy: string | null;
}

/** The result of a change: the snapshots the audit log records. */
export interface MaintenanceUpdate {
  before: Maintenance;
  after: Maintenance;
  changed: boolean;
}

const OFF: StoredMaintenance = { _id: GLOBAL_ID, enabled: false, message: null, allowedPlayers: [], updatedAt: null, updatedBy: null };

/** Reads and changes the global maintenance switch. */
export class MaintenanceService {
  private readonly collection: Collection<StoredMaintenance>;
  private cached: { atMs: number; value: Promise<StoredMaintenance> } | null = null;

  constructor(
    store: DocumentStore,
    private readonly events: EventBus,
    private readonly clock: Clock,
    /** Serialises the read-modify-write across controllers (the record lock). */
    private readonly lock: KeyedLock = new KeyedMutex(),
  ) {
    this.collection = store.collection<StoredMaintenance>(MAINTENANCE_COLLECTION);
  }

  /** The current state, read from the store. */
  async get(): Promise<Maintenance> {
    return toView(await this.read());
  }

  /**
   * The state for an admission: a read at most {@link maintenanceCacheMs} old. A failed read is not
   * cached (the next admission reads again).
   */
  current(): Promise<Maintenance> {
    const nowMs = this.clock.nowMs();
    if (!this.cached || nowMs - this.cached.atMs >= maintenanceCacheMs) {
      const value = this.read();
      this.cached = { atMs: nowMs, value };
      value.catch(() => (this.cached = null));
    }
    return this.cached.value.then(toView);
  }

  /** Applies `patch` under the record lock; publishes MAINTENANCE_UPDATED when something changed. */
  async update(patch: MaintenancePatch, by: string): Promise<MaintenanceUpdate> {
    checkSchema(MaintenancePatchSchema, patch, "body");
    const result = await this.lock.run(GLOBAL_ID, async () => {
      const current = await this.read();
      const next: StoredMaintenance = { ...current, allowedPlayers: [...current.allowedPlayers] };
      if (patch.enabled !== undefined) next.enabled = patch.enabled;
      if (patch.message !== undefined) next.message = patch.message === null || patch.message.trim() === "" ? null : patch.message;
      if (patch.allowedPlayers !== undefined) next.allowedPlayers = normalizeAllowed(patch.allowedPlayers);
      const changed =
        next.enabled !== current.enabled || next.message !== current.message || JSON.stringify(next.allowedPlayers) !== JSON.stringify(current.allowedPlayers);
      if (changed) {
        next.updatedAt = isoFromMs(this.clock.nowMs());
        next.updatedBy = by;
        await this.collection.put(next);
      }
      return { before: current, after: changed ? next : current, changed };
    });
    this.cached = null;
    if (result.changed) {
      this.events.publish(EventTypes.MAINTENANCE_UPDATED, {
        globalEnabled: result.after.enabled,
        message: result.after.message,
      } satisfies MaintenanceUpdatedPayload);
    }
    return { before: toView(result.before), after: toView(result.after), changed: result.changed };
  }

  private async read(): Promise<StoredMaintenance> {
    return (await this.collection.get(GLOBAL_ID)) ?? OFF;
  }
}

/** Whether `player` (by UUID or name) is on the allowed list of `state`. */
export function isAllowedPlayer(state: Pick<Maintenance, "allowedPlayers">, uuid: string, name: string): boolean {
  const wanted = new Set([uuid.toLowerCase(), name.toLowerCase()]);
  return state.allowedPlayers.some((entry) => wanted.has(entry));
}

/** Lower-cased, without duplicates, sorted: the list compares equal however it was typed. */
function normalizeAllowed(entries: readonly string[]): string[] {
  return [...new Set(entries.map((entry) => entry.trim().toLowerCase()))].sort();
}

function toView(doc: StoredMaintenance): Maintenance {
  return {
    enabled: doc.enabled,
    message: doc.message,
    allowedPlayers: [...doc.allowedPlayers],
    bypassPermission: MAINTENANCE_BYPASS_PERMISSION,
    updatedAt: doc.updatedAt,
    updatedBy: doc.updatedBy,
  };
}

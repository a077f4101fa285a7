/**
 * Patches and rollbacks of the cluster-shared config (docs/decisions/cluster-config.md). A patch
 * merges its keys into the active version (null removes a key) and proposes the result as a new
 * version with the active one as its parent (`config.put`); a rollback activates an earlier
 * version (`config.activate`). Both are compare-and-set in the state machine: when another
 * controller changed the active version meanwhile, the proposal is refused and this one merges
 * again (bounded). The proposer — and only it — publishes CLUSTER_CONFIG_CHANGED {version,
 * parentVersion, mutator, action}; every controller applies the new version when its Raft log
 * applies it (shared-settings.ts).
 */
import { EventTypes, type ClusterConfigChangedPayload } from "../../events/event-types.js";
import type { EventBus } from "../../events/types.js";
import { checkSchema } from "../../domain/shared/validate.js";
import { conflict } from "../../shared/errors.js";
import { CommandRefusal, type AppliedCommand, type UnstampedCommand } from "./cluster-commands.js";
import { refusalError } from "./cluster-errors.js";
import type { ConfigVersionRecord } from "./cluster-state-machine.js";
import { SharedSettingsSchema } from "./shared-settings.js";

/** Attempts of one patch or rollback when other controllers keep changing the active version. */
export const configChangeAttemptsMax = 5;

/** What the admin needs of the cluster service. */
export interface ClusterConfigPort {
  activeConfig(): { version: number | null; config: Readonly<Record<string, unknown>> };
  commit<T>(command: UnstampedCommand): Promise<AppliedCommand<T>>;
  waitApplied(index: number): Promise<void>;
}

/** The outcome of a change: the version now active and the configs before and after. */
export interface ConfigChange {
  changed: boolean;
  version: number | null;
  parentVersion: number | null;
  before: Record<string, unknown>;
  after: Record<string, unknown>;
}

export class ClusterConfigAdmin {
  constructor(
    private readonly cluster: ClusterConfigPort,
    private readonly events: EventBus,
  ) {}

  /** Merges `settings` (null removes a key) into the active version as a new one. */
  async patch(settings: Record<string, unknown>, comment: string, by: string): Promise<ConfigChange> {
    for (let attempt = 1; ; attempt++) {
      const active = this.cluster.activeConfig();
      const next: Record<string, unknown> = { ...active.config };
      for (const [key, value] of Object.entries(settings)) {
        if (value === null) delete next[key];
        else next[key] = value;
      }
      checkSchema(SharedSettingsSchema, next, "settings");
      if (JSON.stringify(sorted(next)) === JSON.stringify(sorted(active.config))) {
        return { changed: false, version: active.version, parentVersion: active.version, before: { ...active.config }, after: next };
      }
      const result = await this.cluster.commit<ConfigVersionRecord>({ op: "config.put", config: next, comment, by, parentVersion: active.version });
      if (result.ok) {
        this.announce(result.value.version, active.version, by, "patched");
        return { changed: true, version: result.value.version, parentVersion: active.version, before: { ...active.config }, after: next };
      }
      await this.retryOrThrow(result, attempt);
    }
  }

  /** Makes `version` the active one again. */
  async rollback(version: number, by: string): Promise<ConfigChange> {
    for (let attempt = 1; ; attempt++) {
      const active = this.cluster.activeConfig();
      if (active.version === version) throw conflict(`Config version ${version} is already active`, "CONFIG_VERSION_ACTIVE");
      const result = await this.cluster.commit<ConfigVersionRecord>({ op: "config.activate", version, by, expectedActive: active.version });
      if (result.ok) {
        this.announce(version, active.version, by, "rolled_back");
        return { changed: true, version, parentVersion: active.version, before: { ...active.config }, after: { ...result.value.config } };
      }
      await this.retryOrThrow(result, attempt);
    }
  }

  private async retryOrThrow(result: AppliedCommand & { ok: false }, attempt: number): Promise<void> {
    if (result.code !== CommandRefusal.WriteConflict || attempt >= configChangeAttemptsMax) throw refusalError(result.code, result.message);
    // Another controller changed the active version: learn it, then merge again.
    await this.cluster.waitApplied(result.index);
  }

  private announce(version: number, parentVersion: number | null, mutator: string, action: "patched" | "rolled_back"): void {
    this.events.publish(EventTypes.CLUSTER_CONFIG_CHANGED, { version, parentVersion, mutator, action } satisfies ClusterConfigChangedPayload);
  }
}

function sorted(config: Readonly<Record<string, unknown>>): [string, unknown][] {
  return Object.entries(config).sort(([a], [b]) => (a < b ? -1 : 1));
}

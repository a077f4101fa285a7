/**
 * The cluster-shared settings as this controller applies them while it runs (composition): built
 * from controller.yml, then told every active cluster config version its Raft log applies. The
 * objects handed to the rooms are read at every use, so a change takes effect without a restart:
 * the crash-loop detector reads `crashLoop` at each crash, the share service reads `share` at each
 * share, the audit pruner reads the retention at each run, and the scheduler's start pacing is
 * set on the host. docs/decisions/cluster-config.md.
 */
import { effectiveSettings, fileSettings, type EffectiveSetting, type SharedSettings } from "../cluster/state/shared-settings.js";
import type { ControllerConfig } from "../config/schema.js";
import type { Logger } from "../logs/types.js";
import type { CrashLoopOptions } from "../scheduler/crash-loop.js";

/** Mutable share switches (the share service keeps a reference). */
export interface LiveShareSettings {
  enabled: boolean;
  defaultPrivate: boolean;
  serviceUrl: string;
}

export class LiveSettings {
  readonly crashLoop: CrashLoopOptions;
  readonly share: LiveShareSettings;
  private retentionDays: number;
  private startingPerNodeMax: number;
  private readonly file: Required<SharedSettings>;
  private cluster: { version: number | null; config: Readonly<Record<string, unknown>> } = { version: null, config: {} };
  private startingPerNodeListener: ((value: number) => void) | null = null;

  constructor(
    config: Pick<ControllerConfig, "scheduler" | "crashes" | "share">,
    private readonly logger: Logger,
  ) {
    this.file = fileSettings(config);
    this.crashLoop = { crashLoopThreshold: config.crashes.crashLoopThreshold, crashLoopWindowMs: config.crashes.crashLoopWindowSeconds * 1000 };
    this.share = { enabled: config.share.enabled, defaultPrivate: config.share.defaultPrivate, serviceUrl: config.share.serviceUrl };
    this.retentionDays = config.scheduler.auditRetentionDays;
    this.startingPerNodeMax = config.scheduler.maxStartingPerNode;
  }

  /** The audit retention in force (the pruner reads it at every run). */
  auditRetentionDays(): number {
    return this.retentionDays;
  }

  /** Start pacing per node in force. */
  maxStartingPerNode(): number {
    return this.startingPerNodeMax;
  }

  /** Told the start pacing whenever it changes (the scheduler host); at once when the cluster already sets it. */
  onStartingPerNodeMax(listener: (value: number) => void): void {
    this.startingPerNodeListener = listener;
    if (this.cluster.config["scheduler.maxStartingPerNode"] !== undefined) listener(this.startingPerNodeMax);
  }

  /** Each key's value in force here and its source. */
  effective(): EffectiveSetting[] {
    return effectiveSettings(this.file, this.cluster.config);
  }

  /** The active cluster version (null: none) and its settings. */
  clusterVersion(): number | null {
    return this.cluster.version;
  }

  /** Applies the active cluster config version; keys it does not set fall back to controller.yml. */
  apply(active: { version: number | null; config: Readonly<Record<string, unknown>> }): void {
    this.cluster = active;
    const values = Object.fromEntries(this.effective().map((s) => [s.key, s.value])) as Required<SharedSettings>;
    this.crashLoop.crashLoopThreshold = values["crashes.crashLoopThreshold"];
    this.crashLoop.crashLoopWindowMs = values["crashes.crashLoopWindowSeconds"] * 1000;
    this.share.enabled = values["share.enabled"];
    this.share.defaultPrivate = values["share.defaultPrivate"];
    this.retentionDays = values["scheduler.auditRetentionDays"];
    if (values["scheduler.maxStartingPerNode"] !== this.startingPerNodeMax) {
      this.startingPerNodeMax = values["scheduler.maxStartingPerNode"];
      this.startingPerNodeListener?.(this.startingPerNodeMax);
    }
    const overridden = this.effective().filter((s) => s.source === "cluster" && s.value !== this.file[s.key]);
    for (const setting of overridden) {
      this.logger.info(
        `Cluster config version ${active.version}: ${setting.key} = ${String(setting.value)} (controller.yml says ${String(this.file[setting.key])})`,
      );
    }
  }
}

/**
 * The platform modules of one controller, assembled: records and bundles in the shared stores, the
 * modules' workers (manager), the sync with the other controllers, the install service, the
 * registries, the journal feed, leak tracking, soft quotas and metrics. The composition root builds
 * it (`controller/modules.ts`) and the management routes call it.
 */
import { mkdir } from "node:fs/promises";
import type { ControllerConfig } from "../config/schema.js";
import type { EventBus } from "../events/types.js";
import type { LogService } from "../logs/types.js";
import type { MetricsService } from "../metrics/metrics.js";
import { ApiError } from "../shared/errors.js";
import type { Clock } from "../shared/clock.js";
import type { BlobStore, DocumentStore, KvStore } from "../store/ports.js";
import { BundleRejected } from "./bundle/bundle-error.js";
import { DEVELOPMENT_MODULE_PUBLIC_KEY_PEM } from "./bundle/development-key.js";
import { parsePublicKey, type TrustedKey } from "./bundle/signature.js";
import { LeakTracker, LEAK_POLL_INTERVAL_MS, type TrackedLoader } from "./host/leak-tracker.js";
import { ModuleEventFeed, type JournalView } from "./host/module-event-feed.js";
import { ModuleManager } from "./host/module-manager.js";
import type { ModuleRpcContext } from "./host/module-rpc.js";
import { ModuleStorageHost } from "./host/module-storage.js";
import { QuotaMonitor } from "./host/quota-monitor.js";
import { createModuleMetrics } from "./module-metrics.js";
import { ModuleRecords } from "./module-records.js";
import { ModuleService } from "./module-service.js";
import { ModuleSync } from "./module-sync.js";
import { capabilitiesView, moduleView, type CapabilitiesView, type ModuleView } from "./module-views.js";
import { installFromRegistry, registryCatalog, type CatalogView } from "./registry-install.js";

/** `cloud:v1:modules:leaks:<controllerId>`: a controller's leak report, rewritten every poll. */
export const LEAK_REPORT_KEY_PREFIX = "cloud:v1:modules:leaks:";
/** The channel asking every controller to terminate its leaked workers. */
export const LEAK_CLEANUP_CHANNEL = "cloud:v1:modules:leak-cleanup";
/** How long a lifecycle hook may take. */
export const MODULE_HOOK_TIMEOUT_MS = 30_000;
/** How long a route call or a capability call may take. */
export const MODULE_CALL_TIMEOUT_MS = 30_000;
/** How often a worker reports its heartbeat. */
export const MODULE_HEARTBEAT_INTERVAL_MS = 100;

/** Bounds tests shorten. */
export interface ModulePlatformTuning {
  syncIntervalMs: number;
  leakPollIntervalMs: number;
  quotaIntervalMs: number;
  hookTimeoutMs: number;
  callTimeoutMs: number;
  heartbeatIntervalMs: number;
}

export interface ModulePlatformDeps {
  config: ControllerConfig["modules"];
  profile: ControllerConfig["runtime"]["profile"];
  /** `<data.dir>/modules`. */
  directory: string;
  spoolDirectory: string;
  documents: DocumentStore;
  kv: KvStore;
  blobs: BlobStore;
  lock: { run<T>(name: string, fn: () => Promise<T>): Promise<T> };
  clock: Clock;
  logs: LogService;
  controllerId: string;
  bus: Pick<EventBus, "publishEvent">;
  journal: JournalView;
  runUnderLease: ModuleRpcContext["runUnderLease"];
  metrics: Pick<MetricsService, "enabled" | "registry">;
  tuning?: Partial<ModulePlatformTuning>;
}

/** The keys a controller trusts: the configured ones, and on the development profile the repository's development key. */
export function trustedKeys(config: ControllerConfig["modules"], profile: string): TrustedKey[] {
  const keys = config.signing.publicKeys.map((entry) => parsePublicKey(entry, "config"));
  if (profile === "development") keys.push(parsePublicKey(DEVELOPMENT_MODULE_PUBLIC_KEY_PEM, "development"));
  return keys;
}

/** See the module comment. */
export class ModulePlatform {
  readonly records: ModuleRecords;
  readonly storage: ModuleStorageHost;
  readonly leaks: LeakTracker;
  readonly manager: ModuleManager;
  readonly sync: ModuleSync;
  readonly service: ModuleService;
  readonly quotas: QuotaMonitor;
  readonly keys: readonly TrustedKey[];
  private readonly feed: ModuleEventFeed;
  private readonly tuning: ModulePlatformTuning;
  private unsubscribeCleanup: (() => Promise<void>) | null = null;
  private started = false;

  constructor(private readonly deps: ModulePlatformDeps) {
    const { config, clock, logs, kv } = deps;
    this.tuning = {
      syncIntervalMs: 5_000,
      leakPollIntervalMs: LEAK_POLL_INTERVAL_MS,
      quotaIntervalMs: 10_000,
      hookTimeoutMs: MODULE_HOOK_TIMEOUT_MS,
      callTimeoutMs: MODULE_CALL_TIMEOUT_MS,
      heartbeatIntervalMs: MODULE_HEARTBEAT_INTERVAL_MS,
      ...deps.tuning,
    };
    const logger = logs.logger("cloud.modules");
    this.keys = trustedKeys(config, deps.profile);
    this.records = new ModuleRecords(deps.documents, deps.blobs);
    this.storage = new ModuleStorageHost(deps.documents, kv);
    this.leaks = new LeakTracker(clock, logger, this.tuning.leakPollIntervalMs, () => void this.publishLeakReport());
    const publish = (type: string, data: Record<string, unknown>, source: string, timestamp: string | null) =>
      deps.bus.publishEvent({ type, source, timestamp: timestamp ?? new Date(clock.nowMs()).toISOString(), data });
    let metrics: ReturnType<typeof createModuleMetrics> | null = null;
    this.manager = new ModuleManager({
      controllerId: deps.controllerId,
      tuning: {
        heapMb: config.worker.heapMb,
        hangTimeoutMs: config.worker.hangTimeoutMs,
        hookTimeoutMs: this.tuning.hookTimeoutMs,
        callTimeoutMs: this.tuning.callTimeoutMs,
        heartbeatIntervalMs: this.tuning.heartbeatIntervalMs,
      },
      clock,
      logs,
      storage: this.storage,
      publish,
      runUnderLease: deps.runUnderLease,
      leaks: this.leaks,
      onResolution: (pass) => metrics?.resolution(pass),
    });
    this.quotas = new QuotaMonitor(
      this.manager,
      clock,
      { cpuFraction: config.quotas.cpuPercent / 100, heapFraction: config.quotas.heapPercent / 100 },
      (moduleId, resource) => metrics?.quotaExceeded(moduleId, resource),
      this.tuning.quotaIntervalMs,
    );
    metrics = createModuleMetrics(deps.metrics, () => ({
      modules: () =>
        this.manager.list().map((runtime) => ({
          state: runtime.state,
          health: runtime.state === "ACTIVE" ? this.quotas.health(runtime.id) : null,
          extensions: runtime.module.manifest.extensions.length,
          variants: runtime.module.manifest.extensions.reduce((sum, e) => sum + e.variants.length, 0),
        })),
      loaders: () => this.leaks.counts(),
    }));
    this.sync = new ModuleSync({
      records: this.records,
      manager: this.manager,
      kv,
      clock,
      logger,
      directory: deps.directory,
      spoolDirectory: deps.spoolDirectory,
      syncIntervalMs: this.tuning.syncIntervalMs,
    });
    this.service = new ModuleService({
      records: this.records,
      manager: this.manager,
      sync: this.sync,
      lock: deps.lock,
      clock,
      logger,
      spoolDirectory: deps.spoolDirectory,
      signing: { required: config.signing.required, keys: this.keys },
      publish: (type, data) => publish(type, data, deps.controllerId, null),
    });
    this.feed = new ModuleEventFeed(deps.journal, (event) => this.manager.deliver(event));
  }

  /** Loads the installed modules and follows the cluster. */
  async start(): Promise<void> {
    await mkdir(this.deps.spoolDirectory, { recursive: true });
    this.feed.start();
    this.leaks.start();
    this.quotas.start();
    this.unsubscribeCleanup = await this.deps.kv.subscribe(LEAK_CLEANUP_CHANNEL, () => void this.leaks.forceCleanup());
    await this.sync.start();
    this.started = true;
  }

  /** Stops every module (records stay) and every timer. */
  async stop(): Promise<void> {
    this.started = false;
    this.feed.stop();
    this.quotas.stop();
    await this.unsubscribeCleanup?.().catch(() => undefined);
    await this.sync.stop();
    await this.manager.stopAll();
    await this.leaks.stop();
  }

  /** The readiness check `platformModules`: started, and the last sync with the records succeeded. */
  ready(): boolean {
    return this.started && this.sync.healthy();
  }

  /** After a restore: the records may differ and the modules' storage was replaced; every module restarts. */
  async restartAfterRestore(): Promise<void> {
    await this.sync.sync();
    await this.sync.operations.run("modules", () => this.manager.restartAll());
  }

  async list(): Promise<ModuleView[]> {
    return (await this.records.list()).map((record) => moduleView(record, this.manager.get(record._id), (id) => this.quotas.health(id)));
  }

  async view(id: string): Promise<ModuleView> {
    const record = await this.records.get(id);
    if (!record) throw new ApiError(404, "NOT_FOUND", `Module ${id} is not installed`);
    return moduleView(record, this.manager.get(id), (m) => this.quotas.health(m));
  }

  capabilities(): CapabilitiesView {
    return capabilitiesView(this.manager.list(), this.manager.currentBindings());
  }

  async catalog(): Promise<CatalogView> {
    return registryCatalog(this.deps.config.registries, await this.records.list());
  }

  /** Pulls `spec` (id or id@version) from a configured registry and installs or upgrades it. */
  async installFromRegistry(spec: string, registry: string | null, by: string): Promise<{ view: ModuleView; created: boolean }> {
    try {
      const { record, created } = await installFromRegistry({
        spec,
        registry,
        registries: this.deps.config.registries,
        spoolDirectory: this.deps.spoolDirectory,
        service: this.service,
        by,
      });
      return { view: await this.view(record._id), created };
    } catch (error) {
      if (error instanceof BundleRejected)
        throw new ApiError(422, error.signature ? "SIGNATURE_VERIFICATION_FAILED" : "PLATFORM_INSTALL_FAILED", error.message);
      throw error;
    }
  }

  /** Drops a module's documents and keys. */
  dropStorage(id: string): Promise<{ documents: number; keys: number }> {
    return this.storage.drop(id);
  }

  /** The workers awaiting their end after unload, on every controller (each rewrites its part every poll). */
  async leakReport(): Promise<{ pollIntervalMs: number; pending: number; leaked: number; loaders: (TrackedLoader & { controllerId: string })[] }> {
    const loaders: (TrackedLoader & { controllerId: string })[] = this.leaks.report().map((loader) => ({ ...loader, controllerId: this.deps.controllerId }));
    for (const key of await this.deps.kv.keys(LEAK_REPORT_KEY_PREFIX)) {
      const controllerId = key.slice(LEAK_REPORT_KEY_PREFIX.length);
      if (controllerId === this.deps.controllerId) continue;
      try {
        const part = JSON.parse((await this.deps.kv.get(key)) ?? "[]") as TrackedLoader[];
        for (const loader of part) loaders.push({ ...loader, controllerId });
      } catch {
        // A report being rewritten is read on the next call.
      }
    }
    return {
      pollIntervalMs: this.tuning.leakPollIntervalMs,
      pending: loaders.filter((l) => l.status === "pending").length,
      leaked: loaders.filter((l) => l.status === "leaked").length,
      loaders,
    };
  }

  /** Terminates the leaked workers here and asks every other controller to do the same. */
  async forceCleanup(): Promise<{ terminated: number }> {
    const terminated = await this.leaks.forceCleanup();
    await this.deps.kv.publish(LEAK_CLEANUP_CHANNEL, this.deps.controllerId);
    await this.publishLeakReport();
    return { terminated };
  }

  private async publishLeakReport(): Promise<void> {
    const key = `${LEAK_REPORT_KEY_PREFIX}${this.deps.controllerId}`;
    await this.deps.kv.set(key, JSON.stringify(this.leaks.report()), { ttlMs: 3 * this.tuning.leakPollIntervalMs }).catch(() => undefined);
  }
}

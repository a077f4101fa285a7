/**
 * The platform-module part of the composition: the {@link ModulePlatform} over the shared stores,
 * the event journal, the cluster's singleton leases and the record lock, its management routes and
 * the routes the modules mount, and what starts and stops it. Built by `startController`.
 */
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { AuditRecorder } from "../audit/types.js";
import type { ClusterService } from "../cluster/cluster-service.js";
import type { ControllerConfig } from "../config/schema.js";
import type { KvMutex } from "../coordination/kv-mutex.js";
import type { EventBus } from "../events/types.js";
import type { RouteModule } from "../http/route.js";
import { moduleMountedRoutes } from "../http/routes/module-routes.js";
import { moduleManagementRoutes } from "../http/routes/modules.js";
import type { LogService } from "../logs/types.js";
import type { MetricsService } from "../metrics/metrics.js";
import { ModulePlatform, type ModulePlatformTuning } from "../modules/module-platform.js";
import type { Clock } from "../shared/clock.js";
import type { BlobStore, DocumentStore, KvStore } from "../store/ports.js";
import type { EventStream } from "./event-stream.js";

/** How long a module operation waits for the module's cluster-wide record lock (a load may take a while). */
const MODULE_LOCK_WAIT_MS = 60_000;

export interface ModulesOptions {
  config: ControllerConfig;
  documents: DocumentStore;
  kv: KvStore;
  blobs: BlobStore;
  recordLocks: KvMutex;
  cluster: ClusterService;
  events: EventBus;
  eventStream: EventStream;
  audit: AuditRecorder;
  logs: LogService;
  metrics: MetricsService;
  clock: Clock;
  /** Where uploads and downloads are spooled; the system temporary directory by default. */
  spoolDirectory?: string;
  tuning?: Partial<ModulePlatformTuning>;
  /** The permissions a user holds now: the capability-change stream checks modules.view with it. */
  permissionsOf: (username: string) => Promise<ReadonlySet<string> | null>;
}

/** The built module platform and its routes. */
export interface Modules {
  platform: ModulePlatform;
  routeModules: RouteModule[];
  start(): Promise<void>;
  stop(): Promise<void>;
  /** The readiness check `platformModules`. */
  ready(): boolean;
  /** After a restore: every module restarts over the restored records and storage. */
  restartAfterRestore(): Promise<void>;
}

export function buildModules(options: ModulesOptions): Modules {
  const { config } = options;
  const spoolDirectory = options.spoolDirectory ?? tmpdir();
  const platform = new ModulePlatform({
    config: config.modules,
    profile: config.runtime.profile,
    directory: join(resolve(config.data.dir), "modules"),
    spoolDirectory,
    documents: options.documents,
    kv: options.kv,
    blobs: options.blobs,
    lock: options.recordLocks.scoped("module:", { waitMs: MODULE_LOCK_WAIT_MS }),
    clock: options.clock,
    logs: options.logs,
    controllerId: options.cluster.nodeId,
    bus: options.events,
    journal: options.eventStream.journal,
    runUnderLease: (name, ttlMs, fn) => options.cluster.runUnderLease(name, ttlMs, (lease) => fn(lease)),
    metrics: options.metrics,
    tuning: options.tuning,
  });
  return {
    platform,
    routeModules: [
      moduleManagementRoutes({
        platform,
        audit: options.audit,
        hub: options.eventStream.hub,
        tickets: options.eventStream.tickets,
        permissionsOf: options.permissionsOf,
        spoolDirectory,
      }),
      moduleMountedRoutes(platform.manager),
    ],
    start: () => platform.start(),
    stop: () => platform.stop(),
    ready: () => platform.ready(),
    restartAfterRestore: () => platform.restartAfterRestore(),
  };
}

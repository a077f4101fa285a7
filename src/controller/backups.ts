/**
 * The backup wing: backups in `<data.dir>/backups`, restores, and the restore coordination between
 * controllers. The service is built before anything reads the stores (a restore a killed controller
 * left half done is finished first); the cluster, the stray-instance stop and the coordinated
 * restores are bound to it as they come into being.
 */
import { join, resolve } from "node:path";
import type { AuthService } from "../auth/auth-service.js";
import { BackupService } from "../backup/backup-service.js";
import { clusterBundleKeySource, type BundleKeySource } from "../backup/bundle-auth.js";
import { RestoreCoordination, RESTORE_POLL_INTERVAL_MS, type RestoreHooks } from "../backup/restore-coordination.js";
import { ClusterIdentityStore } from "../cluster/identity/cluster-identity.js";
import type { ClusterService } from "../cluster/cluster-service.js";
import type { ControllerConfig } from "../config/schema.js";
import type { VersionInfo } from "../http/routes/system.js";
import type { ControllerLogService } from "../logs/logger.js";
import type { Clock } from "../shared/clock.js";
import { ApiError } from "../shared/errors.js";
import { uriScheme } from "../store/open.js";
import type { BlobStore, DocumentStore, KvStore } from "../store/ports.js";
import type { Cleanups } from "./lifecycle.js";

/** Slack on top of a lease TTL and two polls before a restore gives up waiting for the scopes to be released. */
const RESTORE_QUIET_MARGIN_MS = 10_000;

export interface BackupsOptions {
  config: ControllerConfig;
  documents: DocumentStore;
  kv: KvStore;
  blobs: BlobStore;
  auth: AuthService;
  version: VersionInfo;
  clock: Clock;
  logs: ControllerLogService;
}

/** The built wing. */
export interface BackupsWing {
  backups: BackupService;
  /** Binds the cluster member: its id names the backups' origin, its key authenticates bundles. */
  joinedCluster(cluster: ClusterService): void;
  /** Binds the stop of instances no restored record names (run after the datastores are restored). */
  setStrayStop(stop: () => Promise<unknown>): void;
  /** Builds the coordination that pauses this controller's scheduling while a restore runs anywhere. */
  coordinatedRestores(controllerId: string, hooks: RestoreHooks): RestoreCoordination;
  /** Starts following restores (after the scheduler started: a restore under way elsewhere pauses it at once). */
  startRestores(coordination: RestoreCoordination, cleanups: Cleanups): Promise<void>;
}

/** Builds the backup service and starts it (finishing an interrupted restore). */
export async function buildBackups(options: BackupsOptions): Promise<BackupsWing> {
  const { config, documents, kv, blobs, auth, version, clock, logs } = options;
  let memberId = "";
  let restoreCoordination: RestoreCoordination | null = null;
  const startupRestoreCoordination = () =>
    new RestoreCoordination({
      kv,
      controllerId: new ClusterIdentityStore(resolve(config.raft.dataDir)).ensureNodeId(),
      clock,
      logger: logs.logger("cloud.backup"),
      hooks: { pause: async () => undefined, resume: async () => undefined, reloadAuth: () => undefined },
      quietTimeoutMs: restoreQuietTimeoutMs(config),
    });
  let stopStrays: (() => Promise<unknown>) | null = null;
  // Bound once the cluster service exists: bundles are authenticated with its key.
  let bundleKey: BundleKeySource = () => null;
  const backups = new BackupService({
    documents,
    kv,
    blobs,
    directory: join(resolve(config.data.dir), "backups"),
    retentionCount: config.backup.retentionCount,
    origin: {
      nodeId: () => memberId,
      softwareVersion: version.version,
      profile: config.runtime.profile,
      documentStore: documentStoreKind(config.database.uri),
    },
    bundleKey: () => bundleKey(),
    clock,
    logger: logs.logger("cloud.backup"),
    onRestored: () => auth.invalidate(),
    // Bound once the scheduler exists. Before it, only a restore interrupted by a kill is
    // finished (at start): the other controllers pause for it; this one schedules nothing yet.
    maintenance: {
      run: (id, work, o) => {
        if (restoreCoordination) return restoreCoordination.run(id, work, o);
        if (o?.finishing) return startupRestoreCoordination().run(id, work, o);
        // Requests are served a moment before the scheduler can be paused for a restore.
        return Promise.reject(new ApiError(503, "NOT_READY", "The controller is still starting; try the restore again in a moment"));
      },
    },
    afterDatastores: async () => {
      await stopStrays?.();
    },
  });
  // Before anything reads the stores: a restore a killed controller left half done is finished first.
  await backups.start();
  return {
    backups,
    joinedCluster: (cluster) => {
      memberId = cluster.nodeId;
      bundleKey = clusterBundleKeySource(cluster);
    },
    setStrayStop: (stop) => {
      stopStrays = stop;
    },
    coordinatedRestores: (controllerId, hooks) =>
      new RestoreCoordination({
        kv,
        controllerId,
        clock,
        logger: logs.logger("cloud.backup"),
        hooks,
        quietTimeoutMs: restoreQuietTimeoutMs(config),
      }),
    startRestores: async (coordination, cleanups) => {
      await coordination.start();
      restoreCoordination = coordination;
      cleanups.push({ name: "restore coordination", run: () => coordination.stop() });
    },
  };
}

/** How long a restore waits for every scope lease to be released: a dead controller's expire within one lease TTL; the others release theirs within a poll. */
function restoreQuietTimeoutMs(config: ControllerConfig): number {
  return 2 * config.scheduler.evaluationIntervalSeconds * 1000 + 2 * RESTORE_POLL_INTERVAL_MS + RESTORE_QUIET_MARGIN_MS;
}

/** The document store a `database.uri` selects, as backup manifests name it. */
function documentStoreKind(uri: string | undefined): string {
  const scheme = uri ? uriScheme(uri) : undefined;
  if (scheme === "postgres" || scheme === "postgresql") return "postgres";
  if (scheme === "mongodb" || scheme === "mongodb+srv") return "mongodb";
  return "embedded";
}

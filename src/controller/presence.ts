/**
 * This controller's presence entry in the shared key-value store (production profile only; the
 * development profile runs one controller over an in-memory store). Claimed right after the stores
 * open and before the cluster member starts, so a second process running under the same controller
 * id (a copied `raft.dataDir`, whose node-id file is the id) is refused before it touches Raft,
 * leases or daemon sessions: startup fails with {@link DuplicateControllerError}, logged at ERROR.
 * See src/coordination/controller-presence.ts for the claim and docs/decisions/coordination.md.
 */
import { resolve } from "node:path";
import { ClusterIdentityStore } from "../cluster/identity/cluster-identity.js";
import type { ControllerConfig } from "../config/schema.js";
import { ControllerPresence, DuplicateControllerError } from "../coordination/controller-presence.js";
import type { LogService } from "../logs/types.js";
import type { Clock } from "../shared/clock.js";
import type { KvStore } from "../store/ports.js";

export interface PresenceOptions {
  config: ControllerConfig;
  kv: KvStore;
  clock: Clock;
  logs: LogService;
  /** Whether this controller's scheduler runs (it then takes group scopes). */
  schedules: boolean;
  /** Another process took the id over while this one was not renewing: the controller stops. */
  onTakenOver: () => void;
}

/** Claims the presence entry on the production profile (null on development); see the module comment. */
export async function claimPresence(options: PresenceOptions): Promise<ControllerPresence | null> {
  const { config, logs } = options;
  if (config.runtime.profile !== "production") return null;
  const log = logs.logger("cloud.coordination.presence");
  const controllerId = new ClusterIdentityStore(resolve(config.raft.dataDir)).ensureNodeId();
  const presence = new ControllerPresence({
    kv: options.kv,
    controllerId,
    // The lease TTL: a controller counts as gone when its leases would have expired.
    ttlMs: 2 * config.scheduler.evaluationIntervalSeconds * 1000,
    schedules: options.schedules,
    clock: options.clock,
    logger: log,
    onTakenOver: options.onTakenOver,
  });
  try {
    await presence.claim();
  } catch (err) {
    if (err instanceof DuplicateControllerError) log.error(err.message);
    throw err;
  }
  log.info(`Controller ${controllerId} is present (process ${presence.nonce})`);
  return presence;
}

/**
 * The audit pruner: one controller of the cluster deletes audit records older than
 * `scheduler.auditRetentionDays`, under the Raft singleton lease `audit-pruner` (1 hour). Every
 * controller tries each `pruneIntervalMs`; one that does not get the lease (another holds it, or
 * Raft cannot commit) skips and tries again on its next tick.
 */
import type { Logger } from "../logs/types.js";
import type { AuditService } from "./audit-service.js";
import { systemClock, type Clock } from "../shared/clock.js";

/** The singleton lease's name and time to live (spec document 2, "Lease key spaces"). */
export const AUDIT_PRUNER_LEASE = "audit-pruner";
export const auditPrunerLeaseTtlMs = 60 * 60 * 1000;
/** How often each controller tries to prune. */
export const pruneIntervalMsDefault = 10 * 60 * 1000;

/** Runs a job while this controller holds a singleton lease; false when it does not. */
export type RunUnderLease = (name: string, ttlMs: number, fn: () => Promise<void>) => Promise<boolean>;

export interface AuditPrunerOptions {
  audit: Pick<AuditService, "prune">;
  runUnderLease: RunUnderLease;
  /** Read at every run: the cluster-shared config may change it while the controller runs. */
  retentionDays: number | (() => number);
  logger: Logger;
  pruneIntervalMs?: number;
  /** The system clock by default. */
  clock?: Clock;
}

/** Starts pruning; returns the function that stops it. */
export function startAuditPruner(options: AuditPrunerOptions): () => void {
  let running = false;
  const tick = async () => {
    if (running) return;
    running = true;
    try {
      const ran = await options.runUnderLease(AUDIT_PRUNER_LEASE, auditPrunerLeaseTtlMs, async () => {
        const days = typeof options.retentionDays === "function" ? options.retentionDays() : options.retentionDays;
        const removed = await options.audit.prune(days);
        if (removed > 0) options.logger.info(`Audit pruner removed ${removed} records older than ${days} days`);
      });
      if (!ran) options.logger.debug("Audit pruner skipped: another controller holds the lease or Raft cannot commit");
    } catch (err) {
      options.logger.warn("Audit pruning failed; retrying on the next tick", err);
    } finally {
      running = false;
    }
  };
  void tick();
  const timer = (options.clock ?? systemClock).setInterval(() => void tick(), options.pruneIntervalMs ?? pruneIntervalMsDefault, { unref: true });
  return () => timer.cancel();
}

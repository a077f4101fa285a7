/**
 * While a restore holds the cluster in maintenance (docs/decisions/backup.md, "Restore on a
 * cluster"), every request that could write under `/api/` (any method but GET, HEAD and OPTIONS)
 * answers 503 RESTORE_IN_PROGRESS with a Retry-After, and changes nothing: the records are being
 * replaced, so a write would be lost or would undo part of the restore. Reads keep working.
 */
import type { MiddlewareHandler } from "hono";
import { errorEnvelope } from "../envelope.js";
import type { AppEnv } from "../types.js";

/** Seconds a client is told to wait before trying a write again. */
export const RESTORE_RETRY_AFTER_SECONDS = 5;

/** The restore holding the cluster, as the gate needs it. */
export interface RestoreInProgress {
  id: string;
  controllerId: string;
  startedAt: string;
}

const READ_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/** 503 RESTORE_IN_PROGRESS for writes while `current()` names a restore. */
export const restoreGate = (opts: { current: () => RestoreInProgress | null }): MiddlewareHandler<AppEnv> =>
  async function restoreGate(c, next) {
    const restore = READ_METHODS.has(c.req.method) || !c.req.path.startsWith("/api/") ? null : opts.current();
    if (!restore) return next();
    c.header("Retry-After", String(RESTORE_RETRY_AFTER_SECONDS));
    const message = `Backup ${restore.id} is being restored (controller ${restore.controllerId}, since ${restore.startedAt}); writes are refused until it is done`;
    return c.json(errorEnvelope(503, "RESTORE_IN_PROGRESS", message), 503);
  };

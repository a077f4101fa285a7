/**
 * The one way route handlers write audit records: after a successful mutation, with the acting
 * principal and the client address taken from the request context. A failed audit write fails the
 * request (500): the audit log is meant to be complete, and the failure is logged with its cause.
 */
import type { AuditEntryInput, AuditRecorder } from "../audit/types.js";
import type { AppContext } from "./types.js";

/** Records `entry` as done by the caller of `c` (`system` when anonymous). */
export async function audited(recorder: AuditRecorder, c: AppContext, entry: AuditEntryInput): Promise<void> {
  const principal = c.get("principal");
  await recorder.record(entry, { username: principal?.username ?? "system", ipAddress: c.get("clientIp") ?? "unknown" });
}

/**
 * What every plugin route shares: the calling instance (from its workload token), the
 * `X-Cloud-Sequence` check of mutating POSTs and the `traceparent` kept on the request context.
 */
import type { MiddlewareHandler } from "hono";
import type { Principal } from "../../auth/principal.js";
import type { VerifiedWorkload } from "../../plugin-api/credentials.js";
import { isSequenceValue, type SequenceGuard } from "../../plugin-api/sequence-guard.js";
import { assert, badRequest, conflict } from "../../shared/errors.js";
import type { AppContext, AppEnv } from "../types.js";

/** The header carrying a plugin's request number. */
export const SEQUENCE_HEADER = "x-cloud-sequence";
/** W3C Trace Context version 00 (a version other than ff; all-zero ids are invalid). */
const TRACEPARENT_PATTERN = /^(?!ff)[0-9a-f]{2}-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/;

/** The verified workload token of the calling instance. */
export function workloadOf(principal: Principal | null): VerifiedWorkload {
  assert(principal?.kind === "workload" && principal.workload, "workload route reached without a workload principal");
  return principal.workload;
}

/** Keeps a well-formed inbound `traceparent` on the context (an invalid one is ignored, as the W3C rules say). */
export const traceContext = (): MiddlewareHandler<AppEnv> =>
  async function traceContext(c, next) {
    const header = c.req.header("traceparent")?.trim().toLowerCase();
    if (header && TRACEPARENT_PATTERN.test(header)) c.set("traceparent", header);
    await next();
  };

/**
 * Checks the request's `X-Cloud-Sequence` (absent: nothing to check): 400 when it is not a positive
 * integer, 409 `SEQUENCE_REPEATED` for a number already accepted in this start of the instance,
 * 409 `SEQUENCE_TOO_OLD` for one that fell out of the window. Called after the body was validated,
 * before anything changes.
 */
export async function checkSequence(c: AppContext, workload: VerifiedWorkload, guard: SequenceGuard): Promise<void> {
  const text = c.req.header(SEQUENCE_HEADER);
  if (text === undefined) return;
  if (!isSequenceValue(text.trim())) throw badRequest("X-Cloud-Sequence: must be a positive integer of at most 9007199254740991 (2^53 - 1)");
  const sequence = Number(text.trim());
  const verdict = await guard.check(workload.instanceId, workload.startId, sequence);
  if (verdict === "REPEATED") throw conflict(`X-Cloud-Sequence ${sequence} was already accepted from instance ${workload.instanceId}`, "SEQUENCE_REPEATED");
  if (verdict === "TOO_OLD")
    throw conflict(`X-Cloud-Sequence ${sequence} is too far behind the highest accepted from instance ${workload.instanceId}`, "SEQUENCE_TOO_OLD");
}

/**
 * Crash record schema (spec document 1, "Crash record"). The record carries `nodeId` and
 * `timestamp` as the table names them, plus `node` and `crashedAt`, the spellings of the list
 * sample, with the same values, so clients written against either read the field they expect.
 */
import { Type, type Static } from "@sinclair/typebox";

/** The crash record as the REST routes return it. */
export const CrashSchema = Type.Object({
  id: Type.String(),
  instanceId: Type.String(),
  group: Type.String(),
  nodeId: Type.String(),
  /** Alias of nodeId. */
  node: Type.String(),
  exitCode: Type.Integer(),
  classification: Type.String(),
  logTail: Type.Array(Type.String()),
  uptimeMs: Type.Integer(),
  /** Why, in one line (additive): the daemon's refusal or failure when the process never ran, else the exit and its last line; null on older records. */
  reason: Type.Union([Type.String(), Type.Null()]),
  timestamp: Type.String({ format: "date-time" }),
  /** Alias of timestamp. */
  crashedAt: Type.String({ format: "date-time" }),
});
/** A crash record. */
export type Crash = Static<typeof CrashSchema>;

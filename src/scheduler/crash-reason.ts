/**
 * Why an instance crashed, in one line, for the crash record's `reason`, the lists and `group
 * info`: the daemon's refusal or failure when the process never ran (`UNKNOWN_PLATFORM: Unknown
 * platform papr`, `SPAWN_FAILED: spawn java ENOENT`), else the exit and the last line the process
 * printed (`exit 1: Error: Unable to access jarfile server.jar`).
 */
import type { CrashCause } from "./actor-effects.js";

/** Longest reason kept; a longer last line is cut (the whole line stays in the log tail). */
export const crashReasonCharsMax = 300;
/** Prefix of the line a crash that never ran adds to its log tail, so the tail is never silent. */
export const daemonLinePrefix = "[cloud] ";

const human: Record<string, string> = {
  NODE_LOST: "the node was lost",
  LOST: "the process was gone when its node was asked",
};

/** The one-line reason of a crash with the given cause, exit code and log tail. */
export function crashReason(cause: CrashCause, exitCode: number, logTail: readonly string[]): string {
  if (cause.kind === "FAILURE") {
    const timeout = /^TIMEOUT:(.+)$/.exec(cause.reason);
    const text = timeout ? `TIMEOUT: no progress within the ${timeout[1]} bound` : (human[cause.reason] ?? cause.reason);
    return clip(text);
  }
  const last = [...logTail].reverse().find((line) => line.trim() !== "" && !line.startsWith(daemonLinePrefix));
  return clip(last === undefined ? `exit ${exitCode} without printing anything` : `exit ${exitCode}: ${last.trim()}`);
}

/** The crash's log tail: a crash whose process never ran gets the reason as its only line. */
export function tailWithReason(cause: CrashCause, logTail: readonly string[], reason: string): string[] {
  if (cause.kind === "FAILURE" && logTail.length === 0) return [`${daemonLinePrefix}${reason}`];
  return [...logTail];
}

function clip(text: string): string {
  return text.length > crashReasonCharsMax ? `${text.slice(0, crashReasonCharsMax - 1)}…` : text;
}

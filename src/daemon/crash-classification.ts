/**
 * Why an instance ended when nobody asked it to: a pure function of the exit status, the last
 * console lines and whether the daemon itself sent SIGKILL. The classification goes into the crash
 * record and INSTANCE_CRASHED.
 */

/** Crash classes, most specific first. */
export type CrashClassification =
  /** The console shows an OutOfMemoryError, or the process died of SIGKILL / exit 137 the daemon did not send (the kernel OOM killer's signature). */
  | "OUT_OF_MEMORY"
  /** Exit code 0 without a stop request (a plugin or an operator inside the game stopped it). */
  | "NORMAL_EXIT_UNEXPECTED"
  /** A non-zero exit code. */
  | "ERROR_EXIT"
  /** Ended by a signal other than an unrequested SIGKILL. */
  | "SIGNAL"
  /** Template layers could not be unpacked (or the working directory prepared). */
  | "PREPARE_FAILED"
  /** The process could not be spawned (missing binary, permissions). */
  | "SPAWN_FAILED";

/** What is known about an exit. */
export interface ExitFacts {
  exitCode: number | null;
  signal: string | null;
  logTail: readonly string[];
  /** True when the daemon sent SIGKILL itself (force-stop or stop escalation). */
  killSentByDaemon: boolean;
}

const OUT_OF_MEMORY_LINE = /OutOfMemoryError|Out of memory|JavaScript heap out of memory/i;
const OOM_EXIT_CODE = 137;

/** Classifies an unexpected exit. */
export function classifyExit(facts: ExitFacts): CrashClassification {
  if (facts.logTail.some((line) => OUT_OF_MEMORY_LINE.test(line))) return "OUT_OF_MEMORY";
  if (!facts.killSentByDaemon && (facts.signal === "SIGKILL" || facts.exitCode === OOM_EXIT_CODE)) return "OUT_OF_MEMORY";
  if (facts.signal !== null) return "SIGNAL";
  if (facts.exitCode === 0) return "NORMAL_EXIT_UNEXPECTED";
  return "ERROR_EXIT";
}

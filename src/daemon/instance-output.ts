/**
 * An instance's output: its stdout and stderr cut into console lines, the bounded wait for the
 * last lines after the process exited, and the crash report built from how it ended.
 */
import { LineSplitter } from "./console-buffer.js";
import { classifyExit } from "./crash-classification.js";
import type { LaunchedProcess } from "./process-launcher.js";
import type { CrashReport, InstanceSpec } from "./runner-types.js";
import type { Clock } from "../shared/clock.js";

/**
 * Reads the process's stdout and stderr as lines of at most `lineMaxChars` and hands each to
 * `onLine` with the stream it came from. Returns the splitters, whose {@link LineSplitter.end}
 * flushes a last line without a newline.
 */
export function attachConsole(
  child: Pick<LaunchedProcess, "stdout" | "stderr">,
  lineMaxChars: number,
  onLine: (line: string, stream: "stdout" | "stderr") => void,
): LineSplitter[] {
  const splitters: LineSplitter[] = [];
  for (const [stream, name] of [
    [child.stdout, "stdout"],
    [child.stderr, "stderr"],
  ] as const) {
    if (stream === null) continue;
    const splitter = new LineSplitter(lineMaxChars, (line) => onLine(line, name));
    splitters.push(splitter);
    stream.on("data", (chunk: Buffer) => splitter.write(chunk));
  }
  return splitters;
}

/**
 * Resolves once the process's pipes are drained ("close"), at once when both already ended, and
 * after `timeoutMs` at the latest: a leftover grandchild could hold the pipes open.
 */
export function waitForPipesToDrain(child: LaunchedProcess, clock: Clock, timeoutMs: number): Promise<void> {
  return new Promise<void>((resolve) => {
    if (child.stdout?.readableEnded !== false && child.stderr?.readableEnded !== false) return resolve();
    const timer = clock.setTimeout(resolve, timeoutMs);
    child.once("close", () => {
      timer.cancel();
      resolve();
    });
  });
}

/** How a process ended that nobody asked to stop. */
export interface UnexpectedExit {
  spec: Pick<InstanceSpec, "instanceId" | "group">;
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  /** The last console lines, oldest first. */
  logTail: string[];
  /** Whether the daemon itself had sent SIGKILL before the exit. */
  killSentByDaemon: boolean;
  spawnedAtMs: number | null;
  nowMs: number;
}

/** The crash report of an unexpected exit, classified by {@link classifyExit}. Pure. */
export function exitCrashReport(exit: UnexpectedExit): CrashReport {
  return {
    instanceId: exit.spec.instanceId,
    group: exit.spec.group,
    exitCode: exit.exitCode,
    signal: exit.signal,
    classification: classifyExit({ exitCode: exit.exitCode, signal: exit.signal, logTail: exit.logTail, killSentByDaemon: exit.killSentByDaemon }),
    logTail: exit.logTail,
    uptimeMs: exit.spawnedAtMs === null ? 0 : Math.max(0, exit.nowMs - exit.spawnedAtMs),
    timestampMs: exit.nowMs,
  };
}

/**
 * The crash report of an instance whose process never ran: the working directory could not be
 * prepared (PREPARE_FAILED) or the process not spawned (SPAWN_FAILED); `reason` is the error's
 * message. Pure.
 */
export function failureCrashReport(
  spec: Pick<InstanceSpec, "instanceId" | "group">,
  classification: "PREPARE_FAILED" | "SPAWN_FAILED",
  error: unknown,
  logTail: string[],
  nowMs: number,
): CrashReport {
  return {
    instanceId: spec.instanceId,
    group: spec.group,
    exitCode: null,
    signal: null,
    classification,
    logTail,
    uptimeMs: 0,
    timestampMs: nowMs,
    reason: error instanceof Error ? error.message : String(error),
  };
}

/**
 * How an instance is stopped and the timers that drive it: the platform's stop command on stdin,
 * SIGTERM to the process group after `stopTimeoutMs`, SIGKILL after `termTimeoutMs` more; a forced
 * stop is SIGKILL at once.
 */
import type { Writable } from "node:stream";
import type { PlatformDefinition } from "./platforms.js";
import type { Clock, Timer } from "../shared/clock.js";

/**
 * The pending timers of one instance (stop escalation, readiness probes), so that all of them
 * can be cleared when the instance changes course. A fired timer forgets itself.
 */
export class InstanceTimers {
  private readonly handles = new Set<Timer>();

  constructor(private readonly clock: Clock) {}

  schedule(delayMs: number, callback: () => void): void {
    const handle = this.clock.setTimeout(() => {
      this.handles.delete(handle);
      callback();
    }, delayMs);
    this.handles.add(handle);
  }

  clear(): void {
    for (const handle of this.handles) handle.cancel();
    this.handles.clear();
  }

  /** Timers armed and not yet fired or cleared. */
  get size(): number {
    return this.handles.size;
  }
}

/** What one run of the stop sequence acts on. */
export interface StopSequenceInput {
  mode: "graceful" | "force";
  platform: Pick<PlatformDefinition, "stopCommand" | "stopTimeoutMs" | "termTimeoutMs">;
  /** The process's standard input, when it has one. */
  stdin: Writable | null | undefined;
  /** Sends a signal to the instance's process group. */
  signalGroup(signal: NodeJS.Signals): void;
  /** Arms a timer of the instance (see {@link InstanceTimers.schedule}). */
  schedule(delayMs: number, callback: () => void): void;
}

/**
 * Starts the stop sequence. Force: SIGKILL now. Graceful: the platform's stop command on an open
 * stdin, then SIGTERM after `stopTimeoutMs`; without a stop command (or an open stdin) SIGTERM
 * now; SIGKILL `termTimeoutMs` after the SIGTERM. The caller clears earlier timers first and the
 * process's exit clears the rest.
 */
export function runStopSequence(input: StopSequenceInput): void {
  const { platform, stdin } = input;
  if (input.mode === "force") {
    input.signalGroup("SIGKILL");
    return;
  }
  const sendTerm = () => {
    input.signalGroup("SIGTERM");
    input.schedule(platform.termTimeoutMs, () => input.signalGroup("SIGKILL"));
  };
  if (platform.stopCommand !== null && stdin && !stdin.destroyed) {
    stdin.write(`${platform.stopCommand}\n`);
    input.schedule(platform.stopTimeoutMs, sendTerm);
  } else {
    sendTerm();
  }
}

/** Sends `signal` to the process group led by `pid`; a group already gone (ESRCH) is not an error. */
export function signalProcessGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // ESRCH: the group is already gone.
  }
}

/**
 * What the runner keeps about one live instance: its spec and platform, where it runs, its state
 * and process, its console, its timers and the promise of its exit.
 */
import { ConsoleRingBuffer, type LineSplitter } from "./console-buffer.js";
import type { PlatformDefinition } from "./platforms.js";
import type { LaunchedProcess } from "./process-launcher.js";
import type { InstanceExit, InstanceRunState, InstanceSnapshot, InstanceSpec } from "./runner-types.js";
import { InstanceTimers } from "./stop-sequence.js";
import type { Clock } from "../shared/clock.js";

/**
 * The runner's mutable record of one instance, from PREPARING until STOPPED or CRASHED. Only the
 * runner changes it; {@link snapshotOf} is what leaves the runner.
 */
export interface InstanceRecord {
  spec: InstanceSpec;
  platform: PlatformDefinition;
  workDir: string;
  state: InstanceRunState;
  child: LaunchedProcess | null;
  pid: number | null;
  console: ConsoleRingBuffer;
  splitters: LineSplitter[];
  spawnedAtMs: number | null;
  readyAtMs: number | null;
  stopRequested: "graceful" | "force" | null;
  /** Plugin readiness that arrived while the process was being spawned (its pid not yet known). */
  readyRequested: boolean;
  /** The process has exited; lines still draining from its pipes no longer make it ready. */
  exited: boolean;
  killSentByDaemon: boolean;
  timers: InstanceTimers;
  prepareAbort: AbortController;
  exit: Promise<InstanceExit>;
  resolveExit: (exit: InstanceExit) => void;
}

/** A new record in PREPARING, with an empty console of `consoleBufferLines` and no process yet. */
export function newInstanceRecord(spec: InstanceSpec, platform: PlatformDefinition, workDir: string, consoleBufferLines: number, clock: Clock): InstanceRecord {
  let resolveExit!: (exit: InstanceExit) => void;
  const exit = new Promise<InstanceExit>((resolve) => (resolveExit = resolve));
  return {
    spec,
    platform,
    workDir,
    state: "PREPARING",
    child: null,
    pid: null,
    console: new ConsoleRingBuffer(consoleBufferLines),
    splitters: [],
    spawnedAtMs: null,
    readyAtMs: null,
    stopRequested: null,
    readyRequested: false,
    exited: false,
    killSentByDaemon: false,
    timers: new InstanceTimers(clock),
    prepareAbort: new AbortController(),
    exit,
    resolveExit,
  };
}

/** The read-only view of a record. Pure. */
export function snapshotOf(instance: InstanceRecord): InstanceSnapshot {
  return {
    instanceId: instance.spec.instanceId,
    group: instance.spec.group,
    platform: instance.platform.id,
    state: instance.state,
    port: instance.spec.port,
    pid: instance.pid,
    workDir: instance.workDir,
    static: instance.spec.static,
    spawnedAtMs: instance.spawnedAtMs,
    readyAtMs: instance.readyAtMs,
  };
}

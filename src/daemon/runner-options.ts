/**
 * The instance runner's construction options and the bounds it runs with once the defaults are
 * applied.
 */
import type { Clock } from "../shared/clock.js";
import type { PlatformDefinition } from "./platforms.js";
import type { ProcessLauncher } from "./process-launcher.js";
import type { TemplateUnpacker } from "./runner-types.js";
import { inheritedEnvNamesDefault } from "./instance-environment.js";

/** Construction options; every bound is named with its unit. */
export interface InstanceRunnerOptions {
  /** Root of working directories: `dynamic/<instanceId>` and `static/<group>/<instanceId>`. */
  workDir: string;
  platforms: ReadonlyMap<string, PlatformDefinition>;
  /** Passed as CLOUD_CONTROLLER_URL when set. */
  controllerUrl?: string | null;
  /** Default: nothing to unpack (directories are created empty). */
  unpackTemplates?: TemplateUnpacker;
  clock?: Clock;
  /** Console lines kept per instance; default 500. */
  consoleBufferLines?: number;
  /** Lines in a crash report's logTail; default 50. */
  crashLogTailLines?: number;
  /** Longer console lines are cut; default 8,192. */
  consoleLineMaxChars?: number;
  /** Longer stdin lines are refused; default 4,096. */
  stdinLineMaxChars?: number;
  /** Interval of the port-open readiness probe; default 250. */
  portProbeIntervalMs?: number;
  /** After the process exits, how long to wait for its pipes to drain; default 500. */
  stdioDrainTimeoutMs?: number;
  /** Live instances at most; default 2,000. */
  instancesMax?: number;
  /**
   * The node's memory budget for instances (daemon.yml `maxMemoryMb`): a start whose memoryMb would
   * take the live instances' sum above it is refused with INSUFFICIENT_MEMORY. Default: no check.
   */
  maxMemoryMb?: number;
  /** Daemon environment variables passed through to instances; default PATH, HOME, LANG, LC_ALL, TZ, TMPDIR, JAVA_HOME. */
  inheritEnvNames?: readonly string[];
  /** Subscribers at most; default 64. */
  listenersMax?: number;
  /** How processes are started; default the direct launcher (the daemon passes its spawner). */
  launcher?: ProcessLauncher;
}

/** The runner's bounds, every one resolved (see {@link resolveRunnerBounds}). */
export interface RunnerBounds {
  consoleBufferLines: number;
  crashLogTailLines: number;
  consoleLineMaxChars: number;
  stdinLineMaxChars: number;
  portProbeIntervalMs: number;
  stdioDrainTimeoutMs: number;
  instancesMax: number;
  listenersMax: number;
  inheritEnvNames: readonly string[];
}

/**
 * The bounds of {@link InstanceRunnerOptions} with their defaults where none is given: 500
 * console lines kept, 50 in a crash report, lines cut at 8,192 characters, stdin lines up to
 * 4,096, a port probe every 250 ms, 500 ms for pipes to drain, 2,000 instances, 64 listeners, and
 * PATH, HOME, LANG, LC_ALL, TZ, TMPDIR, JAVA_HOME inherited. Pure.
 */
export function resolveRunnerBounds(options: InstanceRunnerOptions): RunnerBounds {
  return {
    consoleBufferLines: options.consoleBufferLines ?? 500,
    crashLogTailLines: options.crashLogTailLines ?? 50,
    consoleLineMaxChars: options.consoleLineMaxChars ?? 8_192,
    stdinLineMaxChars: options.stdinLineMaxChars ?? 4_096,
    portProbeIntervalMs: options.portProbeIntervalMs ?? 250,
    stdioDrainTimeoutMs: options.stdioDrainTimeoutMs ?? 500,
    instancesMax: options.instancesMax ?? 2_000,
    listenersMax: options.listenersMax ?? 64,
    inheritEnvNames: options.inheritEnvNames ?? inheritedEnvNamesDefault,
  };
}

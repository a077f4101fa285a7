/**
 * The daemon's process supervisor. Commands come in (start, stop, force-stop, stdin, mark-ready),
 * each with the group's fencing token; state reports, console lines and crash reports go out as
 * {@link RunnerEvent}s to subscribers (the gateway forwards them on the daemon stream). One child
 * process per instance, spawned detached in its own process group so a stop or kill reaches
 * everything it started. Decisions: docs/decisions/daemon-runner.md.
 */
import { access, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { connect } from "node:net";
import { join } from "node:path";
import { systemClock, type Clock } from "../shared/clock.js";
import { ConsoleRingBuffer, LineSplitter, type ConsoleLine } from "./console-buffer.js";
import { classifyExit, type CrashClassification } from "./crash-classification.js";
import { patchPropertiesPort, renderCommand, validatePlatform, type PlatformDefinition } from "./platforms.js";
import { directLauncher, type LaunchedProcess, type ProcessLauncher } from "./process-launcher.js";
import { RunnerError, StaleEpochError } from "./runner-errors.js";
import { INSTANCE_ENV } from "./simulated-server/contract.js";

/** States the runner reports; SCHEDULED and DRAINING are controller-side only. */
export type InstanceRunState = "PREPARING" | "STARTING" | "RUNNING" | "STOPPING" | "STOPPED" | "CRASHED";

/** One template layer to unpack: a template name, at a content hash or (without one) its current version. */
export interface TemplateLayerRef {
  name: string;
  hash?: string;
}

/** What the controller asks the daemon to run. */
export interface InstanceSpec {
  instanceId: string;
  group: string;
  /** A platform id known to the runner. */
  platform: string;
  port: number;
  memoryMb: number;
  /** Default `server.jar`. */
  jarFile?: string;
  /** Persistent working directory `static/<group>/<instanceId>` instead of a temporary one. */
  static: boolean;
  /** Layers in the order they apply. */
  templates: readonly TemplateLayerRef[];
  /** Per-instance credential for the plugin API; passed as CLOUD_WORKLOAD_TOKEN, never logged. */
  workloadToken?: string;
  /** Extra environment for this instance (wins over the platform's). */
  env?: Readonly<Record<string, string>>;
  /** `{{var}}` substitutions handed to the unpacker. */
  variables?: Readonly<Record<string, string>>;
  /** Overrides the runner's controllerUrl for this instance (CLOUD_CONTROLLER_URL). */
  controllerUrl?: string;
}

/** Input of the injected template unpacker. */
export interface TemplateUnpackRequest {
  instanceId: string;
  group: string;
  workDir: string;
  templates: readonly TemplateLayerRef[];
  variables: Readonly<Record<string, string>>;
  /** False when a static instance's persistent directory already existed (its data must survive). */
  freshDirectory: boolean;
  /** Aborted when the instance is stopped while preparing. */
  signal: AbortSignal;
}

/** Unpacks template layers into a working directory (the template cache provides it). */
export type TemplateUnpacker = (request: TemplateUnpackRequest) => Promise<void>;

/** Timer functions, injected so tests and simulations can control them. */
export interface RunnerTimers {
  setTimeout(callback: () => void, delayMs: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** Real timers. */
export const systemTimers: RunnerTimers = {
  setTimeout: (callback, delayMs) => setTimeout(callback, delayMs),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** Why an instance ended unexpectedly (crash record / INSTANCE_CRASHED). */
export interface CrashReport {
  instanceId: string;
  group: string;
  exitCode: number | null;
  signal: string | null;
  classification: CrashClassification;
  /** The last console lines, oldest first. */
  logTail: string[];
  /** From spawn to exit; 0 when the process never ran. */
  uptimeMs: number;
  timestampMs: number;
  /** Set for PREPARE_FAILED and SPAWN_FAILED. */
  reason?: string;
}

/** Everything the runner reports. */
export type RunnerEvent =
  | {
      type: "state";
      instanceId: string;
      group: string;
      state: InstanceRunState;
      previousState: InstanceRunState | null;
      timestampMs: number;
      /** The instance's port (from its spec). */
      port: number;
      /** Set with STOPPED and CRASHED when a process ran. */
      exitCode?: number | null;
      signal?: string | null;
      pid?: number;
    }
  | ({ type: "console"; instanceId: string; group: string } & ConsoleLine)
  | { type: "crash"; report: CrashReport };

/** A read-only view of one live instance. */
export interface InstanceSnapshot {
  instanceId: string;
  group: string;
  platform: string;
  state: InstanceRunState;
  port: number;
  pid: number | null;
  workDir: string;
  static: boolean;
  spawnedAtMs: number | null;
  readyAtMs: number | null;
}

/** How an instance ended. */
export interface InstanceExit {
  instanceId: string;
  state: "STOPPED" | "CRASHED";
  exitCode: number | null;
  signal: string | null;
  crash: CrashReport | null;
}

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
  timers?: RunnerTimers;
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
  /** Daemon environment variables passed through to instances; default PATH, HOME, LANG, LC_ALL, TZ, TMPDIR, JAVA_HOME. */
  inheritEnvNames?: readonly string[];
  /** Subscribers at most; default 64. */
  listenersMax?: number;
  /** How processes are started; default {@link directLauncher} (the daemon passes its spawner). */
  launcher?: ProcessLauncher;
}

const DEFAULT_INHERITED_ENV = ["PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "JAVA_HOME"];
const SAFE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

interface Instance {
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
  /** The process has exited; lines still draining from its pipes no longer make it ready. */
  exited: boolean;
  killSentByDaemon: boolean;
  timers: Set<unknown>;
  prepareAbort: AbortController;
  exit: Promise<InstanceExit>;
  resolveExit: (exit: InstanceExit) => void;
}

/**
 * Runs instances as child processes. Refusals (stale fencing token, unknown instance, bad input)
 * throw a {@link RunnerError} synchronously; everything that happens afterwards is reported as
 * events. The runner never throws on a process misbehaving: that is a crash report.
 */
export class InstanceRunner {
  private readonly instances = new Map<string, Instance>();
  private readonly highestFencingTokens = new Map<string, number>();
  private readonly listeners = new Set<(event: RunnerEvent) => void>();
  /** Instances prepared and waiting for their spawn; at most instancesMax long. */
  private readonly spawnQueue: Instance[] = [];
  private readonly clock: Clock;
  private readonly timers: RunnerTimers;
  private readonly consoleBufferLines: number;
  private readonly crashLogTailLines: number;
  private readonly consoleLineMaxChars: number;
  private readonly stdinLineMaxChars: number;
  private readonly portProbeIntervalMs: number;
  private readonly stdioDrainTimeoutMs: number;
  private readonly instancesMax: number;
  private readonly listenersMax: number;
  private readonly inheritEnvNames: readonly string[];
  private readonly launcher: ProcessLauncher;
  private closed = false;

  constructor(private readonly options: InstanceRunnerOptions) {
    for (const platform of options.platforms.values()) validatePlatform(platform);
    this.clock = options.clock ?? systemClock;
    this.timers = options.timers ?? systemTimers;
    this.consoleBufferLines = options.consoleBufferLines ?? 500;
    this.crashLogTailLines = options.crashLogTailLines ?? 50;
    this.consoleLineMaxChars = options.consoleLineMaxChars ?? 8_192;
    this.stdinLineMaxChars = options.stdinLineMaxChars ?? 4_096;
    this.portProbeIntervalMs = options.portProbeIntervalMs ?? 250;
    this.stdioDrainTimeoutMs = options.stdioDrainTimeoutMs ?? 500;
    this.instancesMax = options.instancesMax ?? 2_000;
    this.listenersMax = options.listenersMax ?? 64;
    this.inheritEnvNames = options.inheritEnvNames ?? DEFAULT_INHERITED_ENV;
    this.launcher = options.launcher ?? directLauncher;
  }

  /** Receives every event synchronously, in order; returns the unsubscribe function. A throwing listener is ignored. */
  subscribe(listener: (event: RunnerEvent) => void): () => void {
    if (this.listeners.size >= this.listenersMax) throw new RunnerError("INVALID_COMMAND", `At most ${this.listenersMax} runner listeners`);
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Accepts a token for a group: refuses one lower than the highest seen with STALE_EPOCH, and
   * remembers a higher one. Every command goes through here; a gateway may also call it when a
   * controller announces a new epoch.
   */
  observeFencingToken(group: string, fencingToken: number): void {
    if (!Number.isSafeInteger(fencingToken) || fencingToken < 0) throw new RunnerError("INVALID_COMMAND", `Fencing token must be a non-negative integer (got ${fencingToken})`);
    const highest = this.highestFencingTokens.get(group);
    if (highest !== undefined && fencingToken < highest) throw new StaleEpochError(group, fencingToken, highest);
    if (highest === undefined || fencingToken > highest) this.highestFencingTokens.set(group, fencingToken);
  }

  /** The highest fencing token seen for a group, if any. */
  highestFencingToken(group: string): number | undefined {
    return this.highestFencingTokens.get(group);
  }

  /**
   * Prepares and starts an instance. Returns at once (state PREPARING); the working directory,
   * template unpacking and spawn follow asynchronously and are reported as events.
   */
  start(spec: InstanceSpec, fencingToken: number): InstanceSnapshot {
    if (this.closed) throw new RunnerError("RUNNER_SHUT_DOWN", "The runner is shutting down");
    const platform = this.validate(spec);
    if (this.instances.has(spec.instanceId)) throw new RunnerError("INSTANCE_EXISTS", `Instance ${spec.instanceId} is already on this node`);
    if (this.instances.size >= this.instancesMax) throw new RunnerError("TOO_MANY_INSTANCES", `At most ${this.instancesMax} instances per daemon`);
    this.observeFencingToken(spec.group, fencingToken);

    let resolveExit!: (exit: InstanceExit) => void;
    const exit = new Promise<InstanceExit>((resolve) => (resolveExit = resolve));
    const workDir = spec.static ? join(this.options.workDir, "static", spec.group, spec.instanceId) : join(this.options.workDir, "dynamic", spec.instanceId);
    const instance: Instance = {
      spec,
      platform,
      workDir,
      state: "PREPARING",
      child: null,
      pid: null,
      console: new ConsoleRingBuffer(this.consoleBufferLines),
      splitters: [],
      spawnedAtMs: null,
      readyAtMs: null,
      stopRequested: null,
      exited: false,
      killSentByDaemon: false,
      timers: new Set(),
      prepareAbort: new AbortController(),
      exit,
      resolveExit,
    };
    this.instances.set(spec.instanceId, instance);
    this.emit({ type: "state", instanceId: spec.instanceId, group: spec.group, state: "PREPARING", previousState: null, timestampMs: this.clock.nowMs(), port: spec.port });
    void this.prepareAndSpawn(instance);
    return this.snapshotOf(instance);
  }

  /**
   * Stops gracefully: the platform's stop command on stdin, SIGTERM after stopTimeoutMs, SIGKILL
   * after termTimeoutMs more. Resolves when the process is gone. Stopping a stopping instance
   * joins the stop already under way.
   */
  stop(instanceId: string, fencingToken: number): Promise<InstanceExit> {
    const instance = this.fencedInstance(instanceId, fencingToken);
    this.requestStop(instance, "graceful");
    return instance.exit;
  }

  /** Kills the process group at once (SIGKILL). Resolves when the process is gone. */
  forceStop(instanceId: string, fencingToken: number): Promise<InstanceExit> {
    const instance = this.fencedInstance(instanceId, fencingToken);
    this.requestStop(instance, "force");
    return instance.exit;
  }

  /** Writes one line (a newline is added) to the instance's standard input. */
  writeStdin(instanceId: string, line: string, fencingToken: number): void {
    const instance = this.fencedInstance(instanceId, fencingToken);
    if (/[\r\n]/.test(line)) throw new RunnerError("INVALID_COMMAND", "A console command is one line");
    if (line.length > this.stdinLineMaxChars) throw new RunnerError("INVALID_COMMAND", `A console command has at most ${this.stdinLineMaxChars} characters`);
    const stdin = instance.child?.stdin;
    if (stdin === null || stdin === undefined || stdin.destroyed || instance.state === "PREPARING") {
      throw new RunnerError("INVALID_STATE", `Instance ${instanceId} has no running process (${instance.state})`);
    }
    stdin.write(`${line}\n`);
  }

  /** Plugin readiness relayed by the controller: STARTING → RUNNING. Already RUNNING: nothing to do. */
  markReady(instanceId: string, fencingToken: number): void {
    const instance = this.fencedInstance(instanceId, fencingToken);
    if (instance.state === "RUNNING") return;
    if (instance.state !== "STARTING" || instance.exited) throw new RunnerError("INVALID_STATE", `Instance ${instanceId} is ${instance.state}, not STARTING`);
    this.becomeReady(instance);
  }

  /** The last `count` console lines of a live instance (all kept lines by default). */
  consoleTail(instanceId: string, count?: number): ConsoleLine[] {
    return this.instanceOrThrow(instanceId).console.tail(count);
  }

  /** One live instance. */
  snapshot(instanceId: string): InstanceSnapshot {
    return this.snapshotOf(this.instanceOrThrow(instanceId));
  }

  /** Every live instance (not yet STOPPED or CRASHED). */
  list(): InstanceSnapshot[] {
    return [...this.instances.values()].map((instance) => this.snapshotOf(instance));
  }

  /**
   * Refuses new starts and stops every instance (graceful by default, each bounded by its
   * platform's timeouts; `force` kills at once). Resolves when every process is gone.
   */
  async shutdown(mode: "graceful" | "force" = "graceful"): Promise<void> {
    this.closed = true;
    const exits = [...this.instances.values()].map((instance) => {
      this.requestStop(instance, mode);
      return instance.exit;
    });
    await Promise.all(exits);
  }

  /** Last resort for process exit handlers: SIGKILL to every process group, synchronously. */
  killAllNow(): void {
    this.closed = true;
    for (const instance of this.instances.values()) {
      instance.stopRequested = "force";
      instance.prepareAbort.abort();
      this.signalGroup(instance, "SIGKILL");
    }
  }

  /**
   * Checks a spec the way {@link start} does (INVALID_SPEC, UNKNOWN_PLATFORM) without starting
   * anything or touching fencing tokens; returns the spec's platform.
   */
  validate(spec: InstanceSpec): PlatformDefinition {
    this.validateSpec(spec);
    const platform = this.options.platforms.get(spec.platform);
    if (platform === undefined) throw new RunnerError("UNKNOWN_PLATFORM", `Unknown platform ${spec.platform}`);
    return platform;
  }

  private validateSpec(spec: InstanceSpec): void {
    const fail = (why: string): never => {
      throw new RunnerError("INVALID_SPEC", `Instance ${spec.instanceId}: ${why}`);
    };
    if (!SAFE_NAME.test(spec.instanceId) || spec.instanceId.includes("..")) fail("instanceId must match ^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$");
    if (!SAFE_NAME.test(spec.group) || spec.group.includes("..")) fail("group must match ^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$");
    if (!Number.isInteger(spec.port) || spec.port < 1 || spec.port > 65_535) fail("port must be in 1..65535");
    if (!Number.isInteger(spec.memoryMb) || spec.memoryMb < 1) fail("memoryMb must be a positive integer");
  }

  private fencedInstance(instanceId: string, fencingToken: number): Instance {
    const instance = this.instanceOrThrow(instanceId);
    this.observeFencingToken(instance.spec.group, fencingToken);
    return instance;
  }

  private instanceOrThrow(instanceId: string): Instance {
    const instance = this.instances.get(instanceId);
    if (instance === undefined) throw new RunnerError("UNKNOWN_INSTANCE", `No instance ${instanceId} on this node`);
    return instance;
  }

  private snapshotOf(instance: Instance): InstanceSnapshot {
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

  private emit(event: RunnerEvent): void {
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch {
        // A listener's failure is its own; the runner keeps reporting to the others.
      }
    }
  }

  private transition(instance: Instance, state: InstanceRunState, extra: { exitCode?: number | null; signal?: string | null } = {}): void {
    const previousState = instance.state;
    instance.state = state;
    this.emit({
      type: "state",
      instanceId: instance.spec.instanceId,
      group: instance.spec.group,
      state,
      previousState,
      timestampMs: this.clock.nowMs(),
      port: instance.spec.port,
      ...(instance.pid !== null ? { pid: instance.pid } : {}),
      ...extra,
    });
  }

  private schedule(instance: Instance, delayMs: number, callback: () => void): void {
    const handle = this.timers.setTimeout(() => {
      instance.timers.delete(handle);
      callback();
    }, delayMs);
    instance.timers.add(handle);
  }

  private clearTimers(instance: Instance): void {
    for (const handle of instance.timers) this.timers.clearTimeout(handle);
    instance.timers.clear();
  }

  private async prepareAndSpawn(instance: Instance): Promise<void> {
    const { spec, platform } = instance;
    let freshDirectory: boolean;
    try {
      if (!spec.static) await rm(instance.workDir, { recursive: true, force: true, maxRetries: 3 });
      freshDirectory = !(await pathExists(instance.workDir));
      await mkdir(instance.workDir, { recursive: true });
      if (this.options.unpackTemplates !== undefined && instance.stopRequested === null) {
        await this.options.unpackTemplates({
          instanceId: spec.instanceId,
          group: spec.group,
          workDir: instance.workDir,
          templates: spec.templates,
          variables: spec.variables ?? {},
          freshDirectory,
          signal: instance.prepareAbort.signal,
        });
      }
      if (platform.portPassing === "file" && platform.portFile !== undefined) {
        const file = join(instance.workDir, platform.portFile.path);
        const existing = (await pathExists(file)) ? await readFile(file, "utf8") : null;
        await writeFile(file, patchPropertiesPort(existing, platform.portFile.key, spec.port));
      }
    } catch (error) {
      await this.finishFailed(instance, "PREPARE_FAILED", error);
      return;
    }
    this.spawnQueue.push(instance);
    if (this.spawnQueue.length === 1) setImmediate(() => this.drainSpawnQueue());
  }

  /**
   * Spawns are taken one per event-loop turn. With the direct launcher spawn() blocks the event
   * loop until the child has exec'd (tens of milliseconds on a busy machine): console lines and
   * readiness of the instances already started are read in between instead of after a whole burst
   * of spawns. The daemon's spawner helper takes that blocking out of this process.
   */
  private drainSpawnQueue(): void {
    const instance = this.spawnQueue.shift();
    if (instance !== undefined) {
      if (instance.stopRequested !== null) void this.finish(instance, "STOPPED", null, null, null);
      else this.spawnProcess(instance);
    }
    if (this.spawnQueue.length > 0) setImmediate(() => this.drainSpawnQueue());
  }

  private spawnProcess(instance: Instance): void {
    const { spec, platform } = instance;
    const argv = renderCommand(platform, {
      memoryMb: spec.memoryMb,
      jarFile: spec.jarFile ?? "server.jar",
      port: spec.port,
      instanceId: spec.instanceId,
      group: spec.group,
      workDir: instance.workDir,
    });
    let child: LaunchedProcess;
    try {
      child = this.launcher.launch({ file: argv[0], args: argv.slice(1), cwd: instance.workDir, env: this.environmentFor(instance) });
    } catch (error) {
      void this.finishFailed(instance, "SPAWN_FAILED", error);
      return;
    }
    instance.child = child;
    let spawned = false;
    let settled = false;
    child.once("spawn", () => {
      spawned = true;
      instance.pid = child.pid ?? null;
      instance.spawnedAtMs = this.clock.nowMs();
      // The streams exist from here on (a spawner helper passes them over with the pid).
      child.stdin?.on("error", () => {
        // EPIPE after the process exited: the exit is reported through the exit handler.
      });
      for (const [stream, name] of [[child.stdout, "stdout"], [child.stderr, "stderr"]] as const) {
        if (stream === null) continue;
        const splitter = new LineSplitter(this.consoleLineMaxChars, (line) => this.onConsoleLine(instance, line, name));
        instance.splitters.push(splitter);
        stream.on("data", (chunk: Buffer) => splitter.write(chunk));
      }
      if (instance.stopRequested !== null) {
        if (instance.state !== "STOPPING") this.transition(instance, "STOPPING");
        this.beginStopSequence(instance);
        return;
      }
      this.transition(instance, "STARTING");
      if (platform.readiness.kind === "port-open") this.probePort(instance);
    });
    child.once("error", (error) => {
      if (spawned || settled) return;
      settled = true;
      void this.finishFailed(instance, "SPAWN_FAILED", error);
    });
    child.once("exit", (exitCode, signal) => {
      if (!spawned || settled) return;
      settled = true;
      void this.onProcessExit(instance, child, exitCode, signal);
    });
  }

  private environmentFor(instance: Instance): NodeJS.ProcessEnv {
    const env: NodeJS.ProcessEnv = {};
    for (const name of this.inheritEnvNames) {
      const value = process.env[name];
      if (value !== undefined) env[name] = value;
    }
    Object.assign(env, instance.platform.env ?? {}, instance.spec.env ?? {});
    env[INSTANCE_ENV.instanceId] = instance.spec.instanceId;
    env[INSTANCE_ENV.group] = instance.spec.group;
    env[INSTANCE_ENV.port] = String(instance.spec.port);
    env[INSTANCE_ENV.memoryMb] = String(instance.spec.memoryMb);
    const controllerUrl = instance.spec.controllerUrl || this.options.controllerUrl;
    if (controllerUrl) env[INSTANCE_ENV.controllerUrl] = controllerUrl;
    if (instance.spec.workloadToken) env[INSTANCE_ENV.workloadToken] = instance.spec.workloadToken;
    return env;
  }

  private onConsoleLine(instance: Instance, line: string, stream: "stdout" | "stderr"): void {
    const entry: ConsoleLine = { line, stream, timestampMs: this.clock.nowMs() };
    instance.console.push(entry);
    this.emit({ type: "console", instanceId: instance.spec.instanceId, group: instance.spec.group, ...entry });
    const readiness = instance.platform.readiness;
    if (instance.state === "STARTING" && !instance.exited && readiness.kind === "log-line" && line.includes(readiness.pattern)) this.becomeReady(instance);
  }

  private becomeReady(instance: Instance): void {
    instance.readyAtMs = this.clock.nowMs();
    this.transition(instance, "RUNNING");
  }

  private probePort(instance: Instance): void {
    if (instance.state !== "STARTING") return;
    const socket = connect({ host: "127.0.0.1", port: instance.spec.port });
    socket.once("connect", () => {
      socket.destroy();
      if (instance.state === "STARTING" && !instance.exited) this.becomeReady(instance);
    });
    socket.once("error", () => {
      socket.destroy();
      if (instance.state === "STARTING") this.schedule(instance, this.portProbeIntervalMs, () => this.probePort(instance));
    });
  }

  private requestStop(instance: Instance, mode: "graceful" | "force"): void {
    if (instance.state === "STOPPED" || instance.state === "CRASHED") return;
    const escalate = mode === "force" && instance.stopRequested === "graceful";
    if (instance.stopRequested !== null && !escalate) return;
    instance.stopRequested = mode;
    if (instance.state === "PREPARING") {
      instance.prepareAbort.abort();
      this.transition(instance, "STOPPING");
      // A spawn under way: the spawn handler starts the stop sequence.
      return;
    }
    if (instance.child === null || instance.pid === null) return;
    if (instance.state !== "STOPPING") this.transition(instance, "STOPPING");
    this.beginStopSequence(instance);
  }

  private beginStopSequence(instance: Instance): void {
    this.clearTimers(instance);
    const { platform } = instance;
    if (instance.stopRequested === "force") {
      this.signalGroup(instance, "SIGKILL");
      return;
    }
    const stdin = instance.child?.stdin;
    const sendTerm = () => {
      this.signalGroup(instance, "SIGTERM");
      this.schedule(instance, platform.termTimeoutMs, () => this.signalGroup(instance, "SIGKILL"));
    };
    if (platform.stopCommand !== null && stdin && !stdin.destroyed) {
      stdin.write(`${platform.stopCommand}\n`);
      this.schedule(instance, platform.stopTimeoutMs, sendTerm);
    } else {
      sendTerm();
    }
  }

  private signalGroup(instance: Instance, signal: NodeJS.Signals): void {
    if (instance.pid === null) return;
    if (signal === "SIGKILL") instance.killSentByDaemon = true;
    try {
      process.kill(-instance.pid, signal);
    } catch {
      // ESRCH: the group is already gone.
    }
  }

  private async onProcessExit(instance: Instance, child: LaunchedProcess, exitCode: number | null, signal: NodeJS.Signals | null): Promise<void> {
    instance.exited = true;
    this.clearTimers(instance);
    // The last lines (an OutOfMemoryError) may still be in the pipes: wait for them, bounded,
    // since a leftover grandchild could hold the pipes open.
    await new Promise<void>((resolve) => {
      if (child.stdout?.readableEnded !== false && child.stderr?.readableEnded !== false) return resolve();
      const handle = this.timers.setTimeout(resolve, this.stdioDrainTimeoutMs);
      child.once("close", () => {
        this.timers.clearTimeout(handle);
        resolve();
      });
    });
    for (const splitter of instance.splitters) splitter.end();
    // Anything the process left behind in its group goes with it.
    const killSentBefore = instance.killSentByDaemon;
    try {
      if (instance.pid !== null) process.kill(-instance.pid, "SIGKILL");
    } catch {
      // ESRCH: nothing left.
    }
    child.stdin?.destroy();
    if (instance.stopRequested !== null) {
      await this.finish(instance, "STOPPED", exitCode, signal, null);
      return;
    }
    const logTail = instance.console.tail(this.crashLogTailLines).map((entry) => entry.line);
    const report: CrashReport = {
      instanceId: instance.spec.instanceId,
      group: instance.spec.group,
      exitCode,
      signal,
      classification: classifyExit({ exitCode, signal, logTail, killSentByDaemon: killSentBefore }),
      logTail,
      uptimeMs: instance.spawnedAtMs === null ? 0 : Math.max(0, this.clock.nowMs() - instance.spawnedAtMs),
      timestampMs: this.clock.nowMs(),
    };
    await this.finish(instance, "CRASHED", exitCode, signal, report);
  }

  private async finishFailed(instance: Instance, classification: "PREPARE_FAILED" | "SPAWN_FAILED", error: unknown): Promise<void> {
    if (instance.stopRequested !== null) return this.finish(instance, "STOPPED", null, null, null);
    const reason = error instanceof Error ? error.message : String(error);
    const report: CrashReport = {
      instanceId: instance.spec.instanceId,
      group: instance.spec.group,
      exitCode: null,
      signal: null,
      classification,
      logTail: instance.console.tail(this.crashLogTailLines).map((entry) => entry.line),
      uptimeMs: 0,
      timestampMs: this.clock.nowMs(),
      reason,
    };
    await this.finish(instance, "CRASHED", null, null, report);
  }

  private async finish(instance: Instance, state: "STOPPED" | "CRASHED", exitCode: number | null, signal: string | null, crash: CrashReport | null): Promise<void> {
    this.clearTimers(instance);
    if (!instance.spec.static) {
      try {
        await rm(instance.workDir, { recursive: true, force: true, maxRetries: 3 });
      } catch {
        // A directory that cannot be removed is removed again before the next start of the id.
      }
    }
    this.instances.delete(instance.spec.instanceId);
    if (crash !== null) this.emit({ type: "crash", report: crash });
    this.transition(instance, state, { exitCode, signal });
    instance.resolveExit({ instanceId: instance.spec.instanceId, state, exitCode, signal, crash });
  }
}

/** Whether `path` exists, without blocking the event loop (instance starts run while servers report). */
async function pathExists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

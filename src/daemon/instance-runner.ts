/**
 * The daemon's process supervisor. Commands come in (start, stop, force-stop, stdin, mark-ready),
 * each with the group's fencing token; state reports, console lines and crash reports go out as
 * {@link RunnerEvent}s to subscribers (the gateway forwards them on the daemon stream). One child
 * process per instance, spawned detached in its own process group so a stop or kill reaches
 * everything it started. Decisions: docs/decisions/daemon-runner.md.
 *
 * This module coordinates each instance's lifecycle (PREPARING → STARTING → RUNNING → STOPPING →
 * STOPPED or CRASHED). The parts: `instance-spec.ts` (spec checks, fencing tokens, directory
 * names), `work-directory.ts` (preparing and removing it), `instance-environment.ts`,
 * `readiness.ts`, `instance-output.ts` (console lines, draining pipes, crash reports),
 * `stop-sequence.ts` (stop command, SIGTERM, SIGKILL and the per-instance timers),
 * `instance-record.ts`, `runner-listeners.ts`, `runner-options.ts` and `runner-types.ts`.
 */
import { systemClock, type Clock } from "../shared/clock.js";
import type { ConsoleLine } from "./console-buffer.js";
import { instanceEnvironment } from "./instance-environment.js";
import { newInstanceRecord, snapshotOf, type InstanceRecord } from "./instance-record.js";
import { attachConsole, exitCrashReport, failureCrashReport, waitForPipesToDrain } from "./instance-output.js";
import { FencingTokens, validateInstanceSpec, workDirectoryOf } from "./instance-spec.js";
import { renderCommand, validatePlatform, type PlatformDefinition } from "./platforms.js";
import { directLauncher, type LaunchedProcess, type ProcessLauncher } from "./process-launcher.js";
import { isReadyLine, probePortOnce } from "./readiness.js";
import { RunnerError } from "./runner-errors.js";
import { RunnerListeners } from "./runner-listeners.js";
import { resolveRunnerBounds, type InstanceRunnerOptions, type RunnerBounds } from "./runner-options.js";
import { type CrashReport, type InstanceExit, type InstanceRunState, type InstanceSnapshot, type InstanceSpec, type RunnerEvent } from "./runner-types.js";
import { runStopSequence, signalProcessGroup } from "./stop-sequence.js";
import { prepareWorkDirectory, removeWorkDirectory } from "./work-directory.js";

export type { InstanceRunnerOptions } from "./runner-options.js";
export type {
  CrashReport,
  InstanceExit,
  InstanceRunState,
  InstanceSnapshot,
  InstanceSpec,
  RunnerEvent,
  TemplateLayerRef,
  TemplateUnpacker,
  TemplateUnpackRequest,
} from "./runner-types.js";

/**
 * Runs instances as child processes. Refusals (stale fencing token, unknown instance, bad input)
 * throw a {@link RunnerError} synchronously; everything that happens afterwards is reported as
 * events. The runner never throws on a process misbehaving: that is a crash report.
 */
export class InstanceRunner {
  private readonly instances = new Map<string, InstanceRecord>();
  private readonly fencingTokens = new FencingTokens();
  private readonly listeners: RunnerListeners;
  /** Instances prepared and waiting for their spawn; at most instancesMax long. */
  private readonly spawnQueue: InstanceRecord[] = [];
  private readonly clock: Clock;
  private readonly bounds: RunnerBounds;
  private readonly launcher: ProcessLauncher;
  private closed = false;

  constructor(private readonly options: InstanceRunnerOptions) {
    for (const platform of options.platforms.values()) validatePlatform(platform);
    this.clock = options.clock ?? systemClock;
    this.bounds = resolveRunnerBounds(options);
    this.listeners = new RunnerListeners(this.bounds.listenersMax);
    this.launcher = options.launcher ?? directLauncher;
  }

  /** Receives every event synchronously, in order; returns the unsubscribe function. A throwing listener is ignored. */
  subscribe(listener: (event: RunnerEvent) => void): () => void {
    return this.listeners.subscribe(listener);
  }

  /**
   * Accepts a token for a group: refuses one lower than the highest seen with STALE_EPOCH, and
   * remembers a higher one. Every command goes through here; a gateway may also call it when a
   * controller announces a new epoch.
   */
  observeFencingToken(group: string, fencingToken: number): void {
    this.fencingTokens.observe(group, fencingToken);
  }

  /** The highest fencing token seen for a group, if any. */
  highestFencingToken(group: string): number | undefined {
    return this.fencingTokens.highestOf(group);
  }

  /**
   * Prepares and starts an instance. Returns at once (state PREPARING); the working directory,
   * template unpacking and spawn follow asynchronously and are reported as events.
   */
  start(spec: InstanceSpec, fencingToken: number): InstanceSnapshot {
    if (this.closed) throw new RunnerError("RUNNER_SHUT_DOWN", "The runner is shutting down");
    const platform = this.validate(spec);
    if (this.instances.has(spec.instanceId)) throw new RunnerError("INSTANCE_EXISTS", `Instance ${spec.instanceId} is already on this node`);
    if (this.instances.size >= this.bounds.instancesMax)
      throw new RunnerError("TOO_MANY_INSTANCES", `At most ${this.bounds.instancesMax} instances per daemon`);
    this.observeFencingToken(spec.group, fencingToken);
    this.checkCapacity(spec);

    const instance = newInstanceRecord(spec, platform, workDirectoryOf(this.options.workDir, spec), this.bounds.consoleBufferLines, this.clock);
    this.instances.set(spec.instanceId, instance);
    this.listeners.emit({
      type: "state",
      instanceId: spec.instanceId,
      group: spec.group,
      state: "PREPARING",
      previousState: null,
      timestampMs: this.clock.nowMs(),
      port: spec.port,
    });
    void this.prepareAndSpawn(instance);
    return snapshotOf(instance);
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
    if (line.length > this.bounds.stdinLineMaxChars)
      throw new RunnerError("INVALID_COMMAND", `A console command has at most ${this.bounds.stdinLineMaxChars} characters`);
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
    if (instance.state === "PREPARING" && instance.child !== null && !instance.exited) {
      // The process runs and called before the launcher passed its pid over: ready once it has.
      instance.readyRequested = true;
      return;
    }
    if (instance.state !== "STARTING" || instance.exited) throw new RunnerError("INVALID_STATE", `Instance ${instanceId} is ${instance.state}, not STARTING`);
    this.becomeReady(instance);
  }

  /** The last `count` console lines of a live instance (all kept lines by default). */
  consoleTail(instanceId: string, count?: number): ConsoleLine[] {
    return this.instanceOrThrow(instanceId).console.tail(count);
  }

  /** One live instance. */
  snapshot(instanceId: string): InstanceSnapshot {
    return snapshotOf(this.instanceOrThrow(instanceId));
  }

  /** Every live instance (not yet STOPPED or CRASHED). */
  list(): InstanceSnapshot[] {
    return [...this.instances.values()].map((instance) => snapshotOf(instance));
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
    validateInstanceSpec(spec);
    const platform = this.options.platforms.get(spec.platform);
    if (platform === undefined) throw new RunnerError("UNKNOWN_PLATFORM", `Unknown platform ${spec.platform}`);
    return platform;
  }

  /**
   * The last line of defence behind the controllers' placement: a port used by a live instance of
   * this node (a process still stopping included) is never given again, and the live instances'
   * memory never goes above maxMemoryMb. The controller reports the refusal as a scheduling issue.
   */
  private checkCapacity(spec: InstanceSpec): void {
    let reservedMb = 0;
    for (const other of this.instances.values()) {
      if (other.spec.port === spec.port)
        throw new RunnerError("PORT_IN_USE", `Port ${spec.port} is used by ${other.spec.instanceId} (${other.state}) on this node`);
      reservedMb += other.spec.memoryMb;
    }
    const maxMb = this.options.maxMemoryMb;
    if (maxMb !== undefined && reservedMb + spec.memoryMb > maxMb) {
      throw new RunnerError(
        "INSUFFICIENT_MEMORY",
        `${spec.instanceId} needs ${spec.memoryMb} MB: ${reservedMb} of ${maxMb} MB are taken by live instances on this node`,
      );
    }
  }

  private fencedInstance(instanceId: string, fencingToken: number): InstanceRecord {
    const instance = this.instanceOrThrow(instanceId);
    this.observeFencingToken(instance.spec.group, fencingToken);
    return instance;
  }

  private instanceOrThrow(instanceId: string): InstanceRecord {
    const instance = this.instances.get(instanceId);
    if (instance === undefined) throw new RunnerError("UNKNOWN_INSTANCE", `No instance ${instanceId} on this node`);
    return instance;
  }

  private transition(instance: InstanceRecord, state: InstanceRunState, extra: { exitCode?: number | null; signal?: string | null } = {}): void {
    const previousState = instance.state;
    instance.state = state;
    this.listeners.emit({
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

  private async prepareAndSpawn(instance: InstanceRecord): Promise<void> {
    try {
      await prepareWorkDirectory({
        spec: instance.spec,
        platform: instance.platform,
        workDir: instance.workDir,
        unpackTemplates: this.options.unpackTemplates,
        shouldUnpack: () => instance.stopRequested === null,
        signal: instance.prepareAbort.signal,
      });
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

  private spawnProcess(instance: InstanceRecord): void {
    const { spec, platform } = instance;
    const argv = renderCommand(platform, {
      memoryMb: spec.memoryMb,
      jarFile: spec.jarFile ?? "server.jar",
      port: spec.port,
      instanceId: spec.instanceId,
      group: spec.group,
      workDir: instance.workDir,
    });
    const env = instanceEnvironment({
      spec,
      platform,
      daemonEnv: process.env,
      inheritEnvNames: this.bounds.inheritEnvNames,
      controllerUrl: this.options.controllerUrl,
    });
    let child: LaunchedProcess;
    try {
      child = this.launcher.launch({ file: argv[0], args: argv.slice(1), cwd: instance.workDir, env });
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
      instance.splitters.push(...attachConsole(child, this.bounds.consoleLineMaxChars, (line, stream) => this.onConsoleLine(instance, line, stream)));
      if (instance.stopRequested !== null) {
        if (instance.state !== "STOPPING") this.transition(instance, "STOPPING");
        this.beginStopSequence(instance);
        return;
      }
      this.transition(instance, "STARTING");
      if (instance.readyRequested) this.becomeReady(instance);
      else if (platform.readiness.kind === "port-open") this.probePort(instance);
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

  private onConsoleLine(instance: InstanceRecord, line: string, stream: "stdout" | "stderr"): void {
    const entry: ConsoleLine = { line, stream, timestampMs: this.clock.nowMs() };
    instance.console.push(entry);
    this.listeners.emit({ type: "console", instanceId: instance.spec.instanceId, group: instance.spec.group, ...entry });
    if (instance.state === "STARTING" && !instance.exited && isReadyLine(instance.platform.readiness, line)) this.becomeReady(instance);
  }

  private becomeReady(instance: InstanceRecord): void {
    instance.readyAtMs = this.clock.nowMs();
    this.transition(instance, "RUNNING");
  }

  private probePort(instance: InstanceRecord): void {
    if (instance.state !== "STARTING") return;
    probePortOnce(
      instance.spec.port,
      () => {
        if (instance.state === "STARTING" && !instance.exited) this.becomeReady(instance);
      },
      () => {
        if (instance.state === "STARTING") instance.timers.schedule(this.bounds.portProbeIntervalMs, () => this.probePort(instance));
      },
    );
  }

  private requestStop(instance: InstanceRecord, mode: "graceful" | "force"): void {
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

  private beginStopSequence(instance: InstanceRecord): void {
    instance.timers.clear();
    runStopSequence({
      mode: instance.stopRequested === "force" ? "force" : "graceful",
      platform: instance.platform,
      stdin: instance.child?.stdin,
      signalGroup: (signal) => this.signalGroup(instance, signal),
      schedule: (delayMs, callback) => instance.timers.schedule(delayMs, callback),
    });
  }

  private signalGroup(instance: InstanceRecord, signal: NodeJS.Signals): void {
    if (instance.pid === null) return;
    if (signal === "SIGKILL") instance.killSentByDaemon = true;
    signalProcessGroup(instance.pid, signal);
  }

  private async onProcessExit(instance: InstanceRecord, child: LaunchedProcess, exitCode: number | null, signal: NodeJS.Signals | null): Promise<void> {
    instance.exited = true;
    instance.timers.clear();
    // The last lines (an OutOfMemoryError) may still be in the pipes: wait for them, bounded,
    // since a leftover grandchild could hold the pipes open.
    await waitForPipesToDrain(child, this.clock, this.bounds.stdioDrainTimeoutMs);
    for (const splitter of instance.splitters) splitter.end();
    // Anything the process left behind in its group goes with it.
    const killSentBefore = instance.killSentByDaemon;
    if (instance.pid !== null) signalProcessGroup(instance.pid, "SIGKILL");
    child.stdin?.destroy();
    if (instance.stopRequested !== null) {
      await this.finish(instance, "STOPPED", exitCode, signal, null);
      return;
    }
    const report = exitCrashReport({
      spec: instance.spec,
      exitCode,
      signal,
      logTail: this.logTailOf(instance),
      killSentByDaemon: killSentBefore,
      spawnedAtMs: instance.spawnedAtMs,
      nowMs: this.clock.nowMs(),
    });
    await this.finish(instance, "CRASHED", exitCode, signal, report);
  }

  private async finishFailed(instance: InstanceRecord, classification: "PREPARE_FAILED" | "SPAWN_FAILED", error: unknown): Promise<void> {
    if (instance.stopRequested !== null) return this.finish(instance, "STOPPED", null, null, null);
    const report = failureCrashReport(instance.spec, classification, error, this.logTailOf(instance), this.clock.nowMs());
    await this.finish(instance, "CRASHED", null, null, report);
  }

  private async finish(
    instance: InstanceRecord,
    state: "STOPPED" | "CRASHED",
    exitCode: number | null,
    signal: string | null,
    crash: CrashReport | null,
  ): Promise<void> {
    instance.timers.clear();
    if (!instance.spec.static) {
      try {
        await removeWorkDirectory(instance.workDir);
      } catch {
        // A directory that cannot be removed is removed again before the next start of the id.
      }
    }
    this.instances.delete(instance.spec.instanceId);
    if (crash !== null) this.listeners.emit({ type: "crash", report: crash });
    this.transition(instance, state, { exitCode, signal });
    instance.resolveExit({ instanceId: instance.spec.instanceId, state, exitCode, signal, crash });
  }

  private logTailOf(instance: InstanceRecord): string[] {
    return instance.console.tail(this.bounds.crashLogTailLines).map((entry) => entry.line);
  }
}

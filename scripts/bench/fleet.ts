// Fleet benchmark: a controller in this process and 20 fake daemons, also in this process, speaking
// the real protocol over real gRPC (mutual TLS on 127.0.0.1). Each fake daemon is a real
// GatewayClient joined with its own node join token (its own hostname, so its own port space); its
// command handler answers start_instance ok and then reports instance_state PREPARING at once,
// STARTING and RUNNING `--step-ms` apart (0: on the next turns of the event loop); stop and
// force-stop answer ok and report STOPPING then STOPPED; an inventory follows every hello_ack. No
// child process runs. Groups of the `simulated` platform (DYNAMIC, min = max, default 20 × 500 =
// 10,000 instances) are created over the REST API; measured from the first creation: the time until
// all instances are RUNNING (INSTANCE_STATE_CHANGED on the controller's event bus), per instance
// SCHEDULED → RUNNING, the process's memory and CPU; then every group is deleted and the time
// until all instances are STOPPED is measured too.
//
//   npx tsx scripts/bench/fleet.ts [--nodes 20] [--groups 20] [--per-group 500] [--step-ms 5]
//     [--memory-mb 16] [--deadline-ms 180000] [--stop-deadline-ms 120000] [--controller-cpu-prof <dir>]
//
// Memory is that of this process: the controller plus the fake daemons (whose own state is a map
// of their instances and a gRPC channel each). Prints a table and one line `RESULT {...}`.
import { mkdtemp, rm } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { GatewayClient } from "../../src/daemon/gateway-client.js";
import { daemonMessage, type CommandResult, type InstanceCommand, type InstanceStateReport } from "../../src/wire/daemon-proto.js";
import {
  argNumber,
  argString,
  createNodeToken,
  InstanceTracker,
  mib,
  monitorLoopDelay,
  ownCpuSeconds,
  percentile,
  printTable,
  progress,
  spread,
  startBenchController,
  startCpuProfile,
  statesOfInstances,
  uptimeLine,
  type BenchController,
} from "./system-bench-support.js";

const nodesCount = argNumber("--nodes", 20);
const groupsCount = argNumber("--groups", 20);
const perGroup = argNumber("--per-group", 500);
const stepMs = argNumber("--step-ms", 5);
const memoryMb = argNumber("--memory-mb", 16);
const deadlineMs = argNumber("--deadline-ms", 180_000);
const stopDeadlineMs = argNumber("--stop-deadline-ms", 120_000);
const controllerProfDir = process.argv.includes("--controller-cpu-prof") ? resolve(argString("--controller-cpu-prof", ".")) : null;
const totalInstances = groupsCount * perGroup;
/** Memory each fake node announces: room for every reservation the scheduler could make. */
const nodeMemoryMb = 1_048_576;

type Result = Omit<CommandResult, "command_id">;
type FakeState = "PREPARING" | "STARTING" | "RUNNING" | "STOPPING" | "STOPPED";

interface FakeInstance {
  group: string;
  port: number;
  state: FakeState;
  timers: NodeJS.Timeout[];
}

/** A daemon without processes: a real GatewayClient whose instances only exist as reports. */
class FakeDaemon {
  readonly client: GatewayClient;
  readonly instances = new Map<string, FakeInstance>();
  private readonly fencingTokens = new Map<string, number>();
  /** The daemon's warnings and errors (disconnects); the first few are kept. */
  readonly warnings: string[] = [];
  warningCount = 0;

  constructor(opts: { index: number; grpcAddress: string; token: string; dataDir: string }) {
    const hostname = `fleet-node-${String(opts.index).padStart(2, "0")}`;
    this.client = new GatewayClient({
      controllers: [opts.grpcAddress],
      token: opts.token,
      hostname,
      dataDir: opts.dataDir,
      maxMemoryMb: nodeMemoryMb,
      usedMemoryMb: () => 0,
      daemonVersion: "fleet-bench",
      statusIntervalMs: 10_000,
      reconnectDelayMinMs: 200,
      reconnectDelayMaxMs: 2_000,
      commandHandler: async (command) => this.handle(command),
      logger: { info: () => undefined, warn: (m) => this.warn(m), error: (m) => this.warn(m) },
      onSessionOpen: () => this.sendInventory(),
    });
  }

  start(): Promise<void> {
    return this.client.start();
  }

  stop(): void {
    for (const instance of this.instances.values()) for (const timer of instance.timers) clearTimeout(timer);
    this.client.stop();
  }

  private warn(message: string): void {
    this.warningCount += 1;
    if (this.warnings.length < 3) this.warnings.push(`${new Date().toISOString().slice(11, 23)} ${message}`);
  }

  private handle(command: InstanceCommand): Result {
    if (command.type === "list_instances")
      return { ...ok(), instances: [...this.instances].filter(([, i]) => i.state !== "STOPPED").map(([id, i]) => this.stateReport(id, i)) };
    if (command.type === "read_instance_log") return refused("NOT_FOUND", "the simulated fleet keeps no instance logs");
    const group = command.body.group;
    const highest = this.fencingTokens.get(group) ?? 0;
    if (command.body.fencing_token < highest) return refused("STALE_EPOCH", `fencing token ${command.body.fencing_token} < ${highest}`);
    this.fencingTokens.set(group, command.body.fencing_token);
    switch (command.type) {
      case "prepare_instance":
        return ok();
      case "start_instance": {
        const spec = command.body.spec;
        if (!spec) return refused("INVALID_SPEC", "no spec");
        const existing = this.instances.get(spec.instance_id);
        if (existing) return ok(`already on this node (${existing.state})`);
        const instance: FakeInstance = { group, port: spec.port, state: "PREPARING", timers: [] };
        this.instances.set(spec.instance_id, instance);
        // As the real runner: PREPARING is reported when the start is accepted, before the answer.
        this.report(spec.instance_id, instance);
        this.after(spec.instance_id, instance, stepMs, "STARTING", () => this.after(spec.instance_id, instance, stepMs, "RUNNING"));
        return ok();
      }
      case "stop_instance":
      case "force_stop_instance": {
        const id = command.body.instance_id;
        const instance = this.instances.get(id);
        if (!instance) return refused("UNKNOWN_INSTANCE", `no instance ${id}`);
        if (instance.state === "STOPPING") return ok();
        for (const timer of instance.timers) clearTimeout(timer);
        instance.timers = [];
        instance.state = "STOPPING";
        this.report(id, instance);
        this.after(id, instance, stepMs, "STOPPED", () => this.instances.delete(id));
        return ok();
      }
      case "stdin_instance":
      case "mark_instance_ready":
        return this.instances.has(command.body.instance_id) ? ok() : refused("UNKNOWN_INSTANCE", `no instance ${command.body.instance_id}`);
    }
  }

  /** Moves `instance` to `state` after `delayMs` (0: the next turn) and reports it. */
  private after(id: string, instance: FakeInstance, delayMs: number, state: FakeState, then?: () => void): void {
    const timer = setTimeout(() => {
      instance.state = state;
      this.report(id, instance);
      then?.();
    }, delayMs);
    instance.timers.push(timer);
  }

  private report(id: string, instance: FakeInstance): void {
    this.client.send(daemonMessage("instance_state", this.stateReport(id, instance)));
  }

  private stateReport(id: string, instance: FakeInstance): InstanceStateReport {
    return {
      instance_id: id,
      group: instance.group,
      state: instance.state,
      fencing_token: this.fencingTokens.get(instance.group) ?? 0,
      port: instance.port,
      pid: 0,
      exit_code: 0,
      message: "",
      timestamp_ms: Date.now(),
    };
  }

  private sendInventory(): void {
    const live = [...this.instances].filter(([, i]) => i.state !== "STOPPED").map(([id, i]) => this.stateReport(id, i));
    this.client.send(daemonMessage("inventory", { instances: live }));
  }
}

const ok = (message = ""): Result => ({ ok: true, error_code: "", message });
const refused = (code: string, message: string): Result => ({ ok: false, error_code: code, message });

/** Resolves once GET /api/v1/nodes lists `count` ONLINE nodes. */
async function nodesOnline(c: BenchController, count: number, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const nodes = (await c.api("GET", "/api/v1/nodes")) as { state: string }[];
    const online = nodes.filter((n) => n.state === "ONLINE").length;
    if (online >= count) return;
    if (performance.now() > deadline) throw new Error(`only ${online} of ${count} nodes ONLINE after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const workDir = await mkdtemp(join(tmpdir(), "bench-fleet-"));
const daemons: FakeDaemon[] = [];
let c: BenchController | null = null;
let failed = false;
try {
  progress("starting the controller");
  c = await startBenchController({ dataDir: join(workDir, "controller") });
  for (let i = 0; i < nodesCount; i++) {
    daemons.push(new FakeDaemon({ index: i + 1, grpcAddress: c.grpcAddress, token: await createNodeToken(c), dataDir: join(workDir, `node-${i + 1}`) }));
  }
  // One join at a time: the controller generates each node's key pair, and 20 at once on a busy
  // machine can outlast the client's join deadline (a retried join finds its token used).
  for (const d of daemons) await d.start();
  await nodesOnline(c, nodesCount, 60_000);
  progress(`${nodesCount} fake daemons ONLINE`);
  const tracker = new InstanceTracker(c.controller);
  const groupNames = Array.from({ length: groupsCount }, (_, i) => `fleet-${String(i + 1).padStart(2, "0")}`);

  const uptimeBefore = uptimeLine();
  const loadBefore = loadavg()[0]!;
  const memoryBefore = process.memoryUsage();
  const cpuBefore = ownCpuSeconds();
  const profile = controllerProfDir ? await startCpuProfile() : null;
  let peakRss = memoryBefore.rss;
  let peakHeap = memoryBefore.heapUsed;
  const sampler = setInterval(() => {
    const m = process.memoryUsage();
    peakRss = Math.max(peakRss, m.rss);
    peakHeap = Math.max(peakHeap, m.heapUsed);
  }, 250);
  const loopDelay = monitorLoopDelay();
  const createdMs = performance.now();
  for (const name of groupNames) {
    await c.api(
      "POST",
      "/api/v1/groups",
      {
        name,
        platform: "simulated",
        scalingMode: "DYNAMIC",
        minInstances: perGroup,
        maxInstances: perGroup,
        maxPlayers: 0,
        memoryMb,
        portRange: { start: 20_000, end: 29_999 },
      },
      201,
    );
  }
  const createCallsMs = performance.now() - createdMs;
  progress(`${groupsCount} groups created: ${totalInstances} instances`);
  const allRunning = await tracker.waitFor("RUNNING", totalInstances, deadlineMs);
  const allRunningMs = performance.now() - createdMs;
  const runningLoopDelay = loopDelay.stop();
  const cpuToRunningS = ownCpuSeconds() - cpuBefore;
  if (profile) await profile.stop(join(controllerProfDir!, `controller-fleet-${Date.now()}.cpuprofile`));
  const memoryAtRunning = process.memoryUsage();
  const uptimeAtRunning = uptimeLine();
  const scheduledToRunning = tracker.durations("SCHEDULED", "RUNNING");
  const createdToScheduled = [...tracker.at.get("SCHEDULED")!.values()].map((at) => at - createdMs).sort((a, b) => a - b);
  const phases = {
    scheduledToPreparing: spread(tracker.durations("SCHEDULED", "PREPARING")),
    preparingToStarting: spread(tracker.durations("PREPARING", "STARTING")),
    startingToRunning: spread(tracker.durations("STARTING", "RUNNING")),
  };
  const scheduledCount = tracker.count("SCHEDULED");
  const recordedStates = await statesOfInstances(c);
  const warningsWhileStarting = daemons.reduce((sum, d) => sum + d.warningCount, 0);

  progress(allRunning ? "all RUNNING; deleting the groups" : `deadline reached: ${tracker.count("RUNNING")} RUNNING; deleting the groups`);
  const stopStartedMs = performance.now();
  for (const name of groupNames) await c.api("DELETE", `/api/v1/groups/${name}`, undefined, 204);
  const allStopped = await tracker.waitFor("STOPPED", scheduledCount, stopDeadlineMs);
  const allStoppedMs = performance.now() - stopStartedMs;
  clearInterval(sampler);
  tracker.close();

  const result = {
    nodes: nodesCount,
    groups: groupsCount,
    perGroup,
    instances: totalInstances,
    stepMs,
    scheduled: scheduledCount,
    running: tracker.count("RUNNING"),
    crashed: tracker.count("CRASHED"),
    timedOut: !allRunning,
    createCallsMs: Math.round(createCallsMs),
    allRunningMs: Math.round(allRunningMs),
    lastScheduledMs: Math.round(percentile(createdToScheduled, 100)),
    scheduledToRunning: spread(scheduledToRunning),
    phases,
    controllerLoopDelay: runningLoopDelay,
    cpuToRunningS: Math.round(cpuToRunningS * 10) / 10,
    rssBeforeMib: mib(memoryBefore.rss),
    rssAtRunningMib: mib(memoryAtRunning.rss),
    heapUsedAtRunningMib: mib(memoryAtRunning.heapUsed),
    peakRssMib: mib(peakRss),
    peakHeapUsedMib: mib(peakHeap),
    stopped: tracker.count("STOPPED"),
    stopTimedOut: !allStopped,
    allStoppedMs: Math.round(allStoppedMs),
    recordedStates,
    daemonWarningsWhileStarting: warningsWhileStarting,
    daemonWarnings: daemons.reduce((sum, d) => sum + d.warningCount, 0),
    daemonWarningSamples: daemons.flatMap((d) => d.warnings).slice(0, 5),
    loadAverage1mBefore: Number(loadBefore.toFixed(1)),
    loadAverage1mAfter: Number(loadavg()[0]!.toFixed(1)),
    uptimeBefore,
    uptimeAtRunning,
    uptimeAfter: uptimeLine(),
    node: process.version,
  };
  printTable(
    `fleet: ${totalInstances} instances (${groupsCount} groups x ${perGroup}) on ${nodesCount} in-process fake daemons over gRPC, reports ${stepMs} ms apart`,
    [
      ["RUNNING / crashed", `${result.running} / ${result.crashed}${result.timedOut ? " (deadline reached)" : ""}`],
      ["all RUNNING after the first group creation (target <= 60000 ms)", `${result.allRunningMs} ms`],
      ["group creation calls", `${result.createCallsMs} ms`],
      ["last SCHEDULED after the first creation", `${result.lastScheduledMs} ms`],
      [
        "SCHEDULED -> RUNNING p50 / p99 / max",
        `${result.scheduledToRunning.p50Ms} / ${result.scheduledToRunning.p99Ms} / ${result.scheduledToRunning.maxMs} ms`,
      ],
      ["SCHEDULED -> PREPARING p50 / p99", `${phases.scheduledToPreparing.p50Ms} / ${phases.scheduledToPreparing.p99Ms} ms`],
      ["PREPARING -> STARTING p50 / p99", `${phases.preparingToStarting.p50Ms} / ${phases.preparingToStarting.p99Ms} ms`],
      ["STARTING -> RUNNING p50 / p99", `${phases.startingToRunning.p50Ms} / ${phases.startingToRunning.p99Ms} ms`],
      ["controller event-loop delay p50 / p99 / max", `${runningLoopDelay.p50Ms} / ${runningLoopDelay.p99Ms} / ${runningLoopDelay.maxMs} ms`],
      ["CPU of the process until all RUNNING", `${result.cpuToRunningS} s`],
      ["RSS before / at all RUNNING / peak", `${result.rssBeforeMib} / ${result.rssAtRunningMib} / ${result.peakRssMib} MiB`],
      ["heap used at all RUNNING / peak", `${result.heapUsedAtRunningMib} / ${result.peakHeapUsedMib} MiB`],
      ["all STOPPED after deleting the groups", `${result.allStoppedMs} ms${result.stopTimedOut ? ` (deadline reached: ${result.stopped} STOPPED)` : ""}`],
      ["instance records by state at all RUNNING / the deadline", JSON.stringify(recordedStates)],
      ["fake daemon warnings (disconnects) while starting / in all", `${result.daemonWarningsWhileStarting} / ${result.daemonWarnings}`],
      ["uptime before", result.uptimeBefore],
      ["uptime at all RUNNING", result.uptimeAtRunning],
      ["uptime after", result.uptimeAfter],
    ],
  );
  console.log(`RESULT ${JSON.stringify(result)}`);
  if (result.timedOut || result.stopTimedOut) {
    failed = true;
    console.error(`--- controller log (tail) ---\n${c.logTail().slice(-5_000)}`);
  }
} catch (err) {
  failed = true;
  console.error(err);
  if (c) console.error(`--- controller log (tail) ---\n${c.logTail().slice(-5_000)}`);
} finally {
  progress("stopping the fake daemons and the controller");
  for (const d of daemons) d.stop();
  await c?.stop().catch((err: unknown) => {
    failed = true;
    console.error(err);
  });
  await rm(workDir, { recursive: true, force: true });
}
progress("done");
// Whatever a failed stop left behind in this process ends with it.
process.exit(failed ? 1 : 0);

/**
 * The controller's side of one module's worker thread: starts it with its memory limits
 * (`resourceLimits`) and an empty environment, numbers the calls it makes (hooks, route calls,
 * capability calls) and settles them with the worker's answers, answers the worker's own calls
 * through `rpc`, and watches it. A worker whose heartbeat stops while its event loop stays busy
 * (a loop that never yields) is terminated after `hangTimeoutMs` (the load hook, which imports and
 * compiles the module, is bounded by the hook timeout instead); one that runs out of heap or
 * crashes ends by itself. Either way `onDeath` says why, once, and every call in flight fails.
 */
import { Worker } from "node:worker_threads";
import type { EventLoopUtilization } from "node:perf_hooks";
import type { Logger } from "../../logs/types.js";
import type { Clock, Timer } from "../../shared/clock.js";
import type { RequestData, ResponseData } from "../../sdk/module/request.js";
import type { ModuleEvent } from "../../sdk/module/types.js";
import type { HookName, HookResult, HostMessage, RpcOp, WireError, WireProvider, WorkerInit, WorkerMessage } from "../worker/protocol.js";

/** Why a worker ended without being asked to. */
export interface WorkerDeath {
  cause: "hung" | "heap" | "crashed";
  message: string;
}

/** A call that failed because the worker is gone or took too long. */
export class WorkerCallFailed extends Error {
  constructor(
    message: string,
    readonly kind: "gone" | "timeout" | "refused",
    readonly wire?: WireError,
  ) {
    super(message);
    this.name = "WorkerCallFailed";
  }
}

export interface ModuleWorkerTuning {
  /** `resourceLimits.maxOldGenerationSizeMb` of the worker. */
  heapMb: number;
  /** A busy worker without a heartbeat for this long is terminated. */
  hangTimeoutMs: number;
  /** How long a lifecycle hook may take. */
  hookTimeoutMs: number;
  /** How long a route call or a capability call may take. */
  callTimeoutMs: number;
  /** How often the worker reports its heartbeat. */
  heartbeatIntervalMs: number;
}

export interface ModuleWorkerOptions {
  init: Omit<WorkerInit, "heartbeatIntervalMs">;
  tuning: ModuleWorkerTuning;
  clock: Clock;
  /** The module's own log lines. */
  logger: Logger;
  /** Answers the worker's calls (storage, events, capabilities, leases). */
  rpc(op: RpcOp, args: unknown[]): Promise<unknown>;
  /** The worker ended without being asked to (called once). */
  onDeath(death: WorkerDeath): void;
}

/** Event-loop utilization above this since the last heartbeat means the worker is stuck in its code, not starved. */
const BUSY_UTILIZATION_MIN = 0.75;
/** Without any heartbeat for this many hang timeouts the worker is ended whatever its loop says. */
const SILENT_HANG_TIMEOUTS_MAX = 20;
/** Young generation of a module worker (MB). */
const YOUNG_GENERATION_MB = 16;

/**
 * The worker entry: the compiled file in a build. Run from source (under tsx), a worker does not
 * inherit tsx's loader, so it registers it first and then imports the TypeScript entry.
 */
function workerEntry(): { entry: URL | string; eval: boolean } {
  if (!import.meta.url.endsWith(".ts")) return { entry: new URL("../worker/worker-main.js", import.meta.url), eval: false };
  const tsxApi = import.meta.resolve("tsx/esm/api");
  const entry = new URL("../worker/worker-main.ts", import.meta.url).href;
  return { entry: `import(${JSON.stringify(tsxApi)}).then(({ register }) => { register(); return import(${JSON.stringify(entry)}); });`, eval: true };
}

type Pending = { resolve(value: never): void; reject(error: Error): void; timer: Timer | null };

/** See the module comment. */
export class ModuleWorker {
  private readonly worker: Worker;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private readonly watchdog: Timer;
  private lastBeatMs: number;
  private beatUtilization: EventLoopUtilization;
  private heapUsedBytes = 0;
  private heapLimitBytes = 0;
  private state: "running" | "shutting-down" | "ended" = "running";
  private deathReported = false;
  /** No heartbeat yet (the thread still starts), or load hooks in flight (importing and compiling the module): hang detection waits. */
  private beaten = false;
  private loadsInFlight = 0;
  private pendingDeath: WorkerDeath | null = null;
  /** Resolves with the exit code once the thread ended. */
  readonly exited: Promise<number>;
  readonly threadId: number;

  constructor(private readonly options: ModuleWorkerOptions) {
    const { tuning, clock } = options;
    const { entry, eval: evaluated } = workerEntry();
    this.worker = new Worker(entry, {
      eval: evaluated,
      workerData: { ...options.init, heartbeatIntervalMs: tuning.heartbeatIntervalMs } satisfies WorkerInit,
      resourceLimits: { maxOldGenerationSizeMb: tuning.heapMb, maxYoungGenerationSizeMb: YOUNG_GENERATION_MB, stackSizeMb: 4 },
      // The controller's secrets (CLOUD_ADMIN_PASSWORD, database URIs) are not a module's business.
      env: {},
      stdout: true,
      stderr: true,
      name: `module:${options.init.moduleId}`,
    });
    this.threadId = this.worker.threadId;
    this.lastBeatMs = clock.nowMs();
    this.beatUtilization = this.worker.performance.eventLoopUtilization();
    this.worker.stdout.setEncoding("utf8").on("data", (text: string) => this.forwardOutput("info", text));
    this.worker.stderr.setEncoding("utf8").on("data", (text: string) => this.forwardOutput("warn", text));
    this.worker.on("message", (message: WorkerMessage) => this.receive(message));
    this.worker.on("error", (error: Error & { code?: string }) => {
      const heap = error.code === "ERR_WORKER_OUT_OF_MEMORY";
      this.pendingDeath ??= { cause: heap ? "heap" : "crashed", message: heap ? `heap exhausted (limit ${tuning.heapMb} MB)` : `crashed: ${error.message}` };
    });
    this.exited = new Promise((resolve) => {
      this.worker.on("exit", (code) => {
        const unexpected = this.state === "running";
        this.state = "ended";
        this.watchdog.cancel();
        this.failPending(new WorkerCallFailed(`module ${options.init.moduleId} stopped`, "gone"));
        if (unexpected) this.reportDeath(this.pendingDeath ?? { cause: "crashed", message: `its thread exited with code ${code}` });
        resolve(code);
      });
    });
    const checkEveryMs = Math.max(10, Math.floor(tuning.hangTimeoutMs / 5));
    this.watchdog = clock.setInterval(() => this.checkAlive(), checkEveryMs, { unref: true });
  }

  /** Runs a lifecycle hook. */
  hook(hook: HookName, fromVersion?: string): Promise<HookResult> {
    const result = this.call<HookResult>((id) => ({ t: "hook", id, hook, fromVersion }), this.options.tuning.hookTimeoutMs, `hook ${hook}`);
    if (hook !== "load") return result;
    // Importing a module compiles it on the worker's thread without a heartbeat: the hook's own timeout bounds it.
    this.loadsInFlight++;
    return result.finally(() => {
      this.loadsInFlight--;
      this.lastBeatMs = Math.max(this.lastBeatMs, this.options.clock.nowMs());
      this.beatUtilization = this.worker.performance.eventLoopUtilization();
    });
  }

  /** Calls route `route` (its index in registration order). */
  request(route: number, request: RequestData): Promise<ResponseData> {
    return this.call<ResponseData>((id) => ({ t: "request", id, route, request }), this.options.tuning.callTimeoutMs, "route call");
  }

  /** Runs a consumer's call on a capability this worker's module provides. */
  callCapability(capabilityId: string, method: string, args: unknown[]): Promise<unknown> {
    return this.call<unknown>(
      (id) => ({ t: "capability-call", id, capabilityId, method, args }),
      this.options.tuning.callTimeoutMs,
      `capability ${capabilityId}`,
    );
  }

  deliver(subscriptions: number[], event: ModuleEvent): void {
    this.post({ t: "event", subscriptions, event });
  }

  rebind(capabilityId: string, provider: WireProvider | null): void {
    this.post({ t: "rebind", capabilityId, provider });
  }

  leaseGranted(run: number, name: string, fencingToken: number): void {
    this.post({ t: "lease-granted", run, name, fencingToken });
  }

  leaseLost(run: number, reason: string): void {
    this.post({ t: "lease-lost", run, reason });
  }

  /** Asks the worker to let go of its port; {@link exited} tells whether it ended. Calls in flight fail. */
  shutdown(): void {
    if (this.state !== "running") return;
    this.state = "shutting-down";
    this.watchdog.cancel();
    this.post({ t: "shutdown" });
    this.failPending(new WorkerCallFailed(`module ${this.options.init.moduleId} is stopping`, "gone"));
  }

  /** Ends the thread now. */
  async terminate(): Promise<void> {
    if (this.state === "running") this.state = "shutting-down";
    this.watchdog.cancel();
    await this.worker.terminate();
  }

  /** The last heartbeat's heap figures, the time since it, and the event-loop utilization since start. */
  stats(): { heapUsedBytes: number; heapLimitBytes: number; sinceBeatMs: number; alive: boolean } {
    return {
      heapUsedBytes: this.heapUsedBytes,
      heapLimitBytes: this.heapLimitBytes,
      sinceBeatMs: this.options.clock.nowMs() - this.lastBeatMs,
      alive: this.state !== "ended",
    };
  }

  /** Event-loop utilization of the worker since `previous` (the advisory CPU measure). */
  utilization(previous?: EventLoopUtilization): EventLoopUtilization {
    return previous ? this.worker.performance.eventLoopUtilization(previous) : this.worker.performance.eventLoopUtilization();
  }

  private call<T>(message: (id: number) => HostMessage, timeoutMs: number, what: string): Promise<T> {
    if (this.state !== "running") return Promise.reject(new WorkerCallFailed(`module ${this.options.init.moduleId} is not running`, "gone"));
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      const timer = this.options.clock.setTimeout(
        () => {
          if (!this.pending.delete(id)) return;
          reject(new WorkerCallFailed(`${what} of module ${this.options.init.moduleId} took longer than ${timeoutMs} ms`, "timeout"));
        },
        timeoutMs,
        { unref: true },
      );
      this.pending.set(id, { resolve: resolve as (value: never) => void, reject, timer });
      this.post(message(id));
    });
  }

  private settle(id: number, ok: boolean, value: unknown, error?: WireError): void {
    const call = this.pending.get(id);
    if (!call) return;
    this.pending.delete(id);
    call.timer?.cancel();
    if (ok) call.resolve(value as never);
    else call.reject(new WorkerCallFailed(error?.message ?? "failed", "refused", error));
  }

  private receive(message: WorkerMessage): void {
    switch (message.t) {
      case "beat":
        this.beaten = true;
        this.lastBeatMs = this.options.clock.nowMs();
        this.beatUtilization = this.worker.performance.eventLoopUtilization();
        this.heapUsedBytes = message.heapUsedBytes;
        this.heapLimitBytes = message.heapLimitBytes;
        return;
      case "hook-done":
        if (message.ok) this.settle(message.id, true, message.result);
        else this.settle(message.id, false, undefined, message.error);
        return;
      case "response":
        this.settle(message.id, true, message.response);
        return;
      case "capability-result":
        if (message.ok) this.settle(message.id, true, message.value);
        else this.settle(message.id, false, undefined, message.error);
        return;
      case "rpc":
        void this.options.rpc(message.op, message.args).then(
          (value) => this.post({ t: "reply", id: message.id, ok: true, value: value ?? null }),
          (error: unknown) => this.post({ t: "reply", id: message.id, ok: false, error: toWire(error) }),
        );
        return;
      case "log":
        this.options.logger[message.level](message.message);
        return;
    }
  }

  private post(message: HostMessage): void {
    if (this.state === "ended") return;
    try {
      this.worker.postMessage(message);
    } catch (error) {
      // A value the module handed over that cannot be cloned fails only its own call.
      if ("id" in message && message.t !== "reply")
        this.settle(message.id, false, undefined, { message: `cannot send to the module: ${(error as Error).message}` });
      else if (message.t === "reply")
        this.post({ t: "reply", id: message.id, ok: false, error: { message: `the result cannot be sent: ${(error as Error).message}` } });
    }
  }

  private checkAlive(): void {
    if (this.state !== "running" || !this.beaten || this.loadsInFlight > 0) return;
    const sinceBeatMs = this.options.clock.nowMs() - this.lastBeatMs;
    const { hangTimeoutMs } = this.options.tuning;
    if (sinceBeatMs <= hangTimeoutMs) return;
    const busy = this.worker.performance.eventLoopUtilization(this.beatUtilization).utilization;
    if (busy < BUSY_UTILIZATION_MIN && sinceBeatMs <= hangTimeoutMs * SILENT_HANG_TIMEOUTS_MAX) return;
    this.pendingDeath = { cause: "hung", message: `no heartbeat for ${sinceBeatMs} ms while its event loop was busy (${Math.round(busy * 100)}%); terminated` };
    this.state = "ended";
    this.watchdog.cancel();
    this.failPending(new WorkerCallFailed(`module ${this.options.init.moduleId} stopped responding`, "gone"));
    this.reportDeath(this.pendingDeath);
    void this.worker.terminate();
  }

  private reportDeath(death: WorkerDeath): void {
    if (this.deathReported) return;
    this.deathReported = true;
    this.options.onDeath(death);
  }

  private failPending(error: WorkerCallFailed): void {
    for (const [id, call] of this.pending) {
      call.timer?.cancel();
      call.reject(error);
      this.pending.delete(id);
    }
  }

  private forwardOutput(level: "info" | "warn", text: string): void {
    for (const line of text.split("\n")) if (line.trim() !== "") this.options.logger[level](line.slice(0, 4096));
  }
}

function toWire(error: unknown): WireError {
  const kind = (error as { kind?: unknown } | null)?.kind;
  const message = error instanceof Error ? error.message : String(error);
  return typeof kind === "string" ? { kind, message } : { message };
}

/**
 * One module on this controller: its worker, its state ({@link ModuleState}) and its route table,
 * and the hook sequences of spec document 3's table ("States and transitions"): install is load then
 * registerRoutes (routes cleared, then registered); upgrade is stop and unload of the old version,
 * then load, upgrade and registerRoutes of the new one in a new worker (old routes cleared, new ones
 * registered); reload (reloadable modules) is reload then registerRoutes in the same worker;
 * uninstall is stop then unload (routes cleared). Whether a loaded module starts is the manager's
 * call (its required capabilities). Any hook that throws, and any death of the worker, leaves the
 * module FAILED with no routes.
 */
import { join } from "node:path";
import type { Logger } from "../../logs/types.js";
import type { Clock } from "../../shared/clock.js";
import type { RequestData, ResponseData } from "../../sdk/module/request.js";
import { parseRouteTemplate, type RouteTemplate } from "../../sdk/module/route-template.js";
import type { ModuleManifest } from "../manifest/manifest-types.js";
import type { HookName, HookResult, RpcOp } from "../worker/protocol.js";
import { assertTransition, ROUTED_STATES, type ModuleState } from "./module-states.js";
import { ModuleWorker, WorkerCallFailed, type ModuleWorkerTuning, type WorkerDeath } from "./module-worker.js";

/** A module version laid out on disk, ready to run. */
export interface LoadableModule {
  manifest: ModuleManifest;
  /** The bundle's tree (its files under their bundle paths). */
  directory: string;
  /** sha256 of the bundle file. */
  bundleSha256: string;
  /** sha256 over the files outside the frontend: equal when only the frontend changed. */
  backendHash: string;
}

/** Why a module is FAILED. */
export interface ModuleFailure {
  reason: string;
  /** hook, hung, heap, crashed, timeout. */
  cause: string;
  atMs: number;
}

export interface ModuleRuntimeDeps {
  controllerId: string;
  tuning: ModuleWorkerTuning;
  clock: Clock;
  /** The module's own logger (`cloud.modules.<id>`). */
  logger: Logger;
  /** Answers the worker's calls for this module. */
  rpc(runtime: ModuleRuntime, op: RpcOp, args: unknown[]): Promise<unknown>;
  /** The module became FAILED (its routes are already cleared). */
  onFailed(runtime: ModuleRuntime): void;
  /** A worker was let go after unload: the leak tracker watches whether it ends. */
  retire(runtime: ModuleRuntime, worker: ModuleWorker): void;
}

/** A route as the host keeps it. */
export interface HostRoute {
  method: string;
  template: RouteTemplate;
}

/** See the module comment. */
export class ModuleRuntime {
  state: ModuleState = "LOADING";
  module: LoadableModule;
  routes: HostRoute[] = [];
  failure: ModuleFailure | null = null;
  worker: ModuleWorker | null = null;
  /** When the state last changed. */
  sinceMs: number;
  /** Capability ids whose handle the module gave. */
  provided: string[] = [];

  constructor(
    module: LoadableModule,
    private readonly deps: ModuleRuntimeDeps,
  ) {
    this.module = module;
    this.sinceMs = deps.clock.nowMs();
  }

  get id(): string {
    return this.module.manifest.id;
  }

  get version(): string {
    return this.module.manifest.version;
  }

  /** Install: a new worker, load, registerRoutes; UNRESOLVED until the manager starts it. False when it FAILED. */
  async install(): Promise<boolean> {
    this.routes = [];
    return this.loadNew(undefined);
  }

  /** UNRESOLVED → STARTING → ACTIVE. False when it FAILED. */
  async start(): Promise<boolean> {
    this.move("STARTING");
    if (!(await this.runHook("start"))) return false;
    this.move("ACTIVE");
    return true;
  }

  /** ACTIVE → UNRESOLVED (a required capability went away): the stop hook runs, the routes stay. */
  async suspend(): Promise<boolean> {
    if (this.state !== "ACTIVE") return true;
    this.move("UNRESOLVED");
    return (await this.runHook("stop")) !== null;
  }

  /** The reload fast path of a reloadable module: reload, then its routes registered again. */
  async reload(): Promise<boolean> {
    const back = this.state;
    if (back !== "ACTIVE" && back !== "UNRESOLVED") return false;
    this.move("RELOADING");
    if (!(await this.runHook("reload"))) return false;
    if (!(await this.registerRoutes())) return false;
    this.move(back);
    return true;
  }

  /** Upgrade to `next`: stop and unload here, then load, upgrade and registerRoutes in a new worker. False when it FAILED. */
  async upgradeTo(next: LoadableModule): Promise<boolean> {
    const fromVersion = this.version;
    const wasRunning = this.state !== "FAILED";
    const wasActive = this.state === "ACTIVE";
    this.move("UPGRADING");
    this.routes = [];
    if (wasRunning) {
      if (wasActive && !(await this.runHook("stop"))) return false;
      if (!(await this.runHook("unload"))) return false;
      this.letGo();
    }
    this.module = next;
    this.failure = null;
    return this.loadNew(fromVersion);
  }

  /** Uninstall (or controller shutdown): stop and unload, routes cleared, the worker let go. */
  async remove(): Promise<void> {
    const wasActive = this.state === "ACTIVE";
    const hadWorker = this.state !== "FAILED";
    this.move("STOPPING");
    this.routes = [];
    if (hadWorker) {
      const stopped = !wasActive || (await this.runHook("stop"));
      if (stopped) await this.runHook("unload");
      if (this.worker) this.letGo();
    }
  }

  /** Calls route `index`; the caller checked the state. */
  call(index: number, request: RequestData): Promise<ResponseData> {
    if (!this.worker || this.state !== "ACTIVE") return Promise.reject(new WorkerCallFailed(`module ${this.id} is ${this.state}`, "gone"));
    return this.worker.request(index, request);
  }

  /** Marks the module FAILED: routes cleared, the worker ended. */
  fail(cause: string, reason: string): void {
    if (this.state === "FAILED") return;
    this.deps.logger.error(`Module ${this.id} ${this.version} failed (${cause}): ${reason}`);
    this.move("FAILED");
    this.routes = [];
    this.provided = [];
    this.failure = { cause, reason, atMs: this.deps.clock.nowMs() };
    const worker = this.worker;
    this.worker = null;
    void worker?.terminate();
    this.deps.onFailed(this);
  }

  /** True while the routes are kept. */
  get routed(): boolean {
    return ROUTED_STATES.has(this.state);
  }

  private async loadNew(fromVersion: string | undefined): Promise<boolean> {
    if (this.state === "FAILED") this.move("LOADING");
    const { manifest, directory } = this.module;
    const entry = manifest.backend.controller!;
    let worker: ModuleWorker;
    try {
      worker = new ModuleWorker({
        init: {
          moduleId: manifest.id,
          version: manifest.version,
          entryFile: join(directory, entry.file),
          exportName: entry.exportName,
          controllerId: this.deps.controllerId,
          storage: { mongo: manifest.storage.mongo, redis: manifest.storage.redis },
          provides: manifest.capabilities.provides.map((c) => c.id),
          requires: manifest.capabilities.requires.map((c) => c.id),
        },
        tuning: this.deps.tuning,
        clock: this.deps.clock,
        logger: this.deps.logger,
        rpc: (op, args) => this.deps.rpc(this, op, args),
        onDeath: (death: WorkerDeath) => {
          if (this.worker === worker) this.fail(death.cause, `worker ${death.message}`);
        },
      });
    } catch (error) {
      this.fail("crashed", `the worker did not start: ${(error as Error).message}`);
      return false;
    }
    this.worker = worker;
    const loaded = await this.runHook("load");
    if (!loaded) return false;
    this.provided = loaded.provided ?? [];
    if (fromVersion !== undefined && !(await this.runHook("upgrade", fromVersion))) return false;
    if (!(await this.registerRoutes())) return false;
    this.move("UNRESOLVED");
    return true;
  }

  private async registerRoutes(): Promise<boolean> {
    this.routes = [];
    const result = await this.runHook("registerRoutes");
    if (!result) return false;
    try {
      this.routes = (result.routes ?? []).map((route) => ({ method: route.method, template: parseRouteTemplate(route.template) }));
    } catch (error) {
      this.fail("hook", `registerRoutes: ${(error as Error).message}`);
      return false;
    }
    return true;
  }

  /** Runs a hook; on failure the module is FAILED and null is returned. */
  private async runHook(hook: HookName, fromVersion?: string): Promise<HookResult | null> {
    const worker = this.worker;
    if (!worker) return null;
    try {
      return await worker.hook(hook, fromVersion);
    } catch (error) {
      if (this.worker !== worker || this.state === "FAILED") return null;
      const cause = error instanceof WorkerCallFailed && error.kind === "timeout" ? "timeout" : "hook";
      this.fail(cause, `${hook} hook: ${(error as Error).message}`);
      return null;
    }
  }

  /** The worker is asked to end by itself; the leak tracker watches it. */
  private letGo(): void {
    const worker = this.worker;
    this.worker = null;
    if (!worker) return;
    worker.shutdown();
    this.deps.retire(this, worker);
  }

  private move(to: ModuleState): void {
    if (this.state === to) return;
    assertTransition(this.id, this.state, to);
    this.state = to;
    this.sinceMs = this.deps.clock.nowMs();
  }
}

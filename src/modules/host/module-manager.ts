/**
 * The modules running on this controller: one {@link ModuleRuntime} each, their operations run one
 * at a time (install, upgrade, reload, remove, restart), the capability resolution pass after each
 * (which starts the modules whose requirements resolved, suspends those that lost a provider and
 * tells consumers of a rebinding), the route lookup of the dispatcher, and the delivery of the
 * cluster's events to the modules' subscriptions. It knows nothing of bundles or records: the
 * module service (`module-service.ts`) hands it modules laid out on disk.
 */
import type { LogService } from "../../logs/types.js";
import { EventTypes, isBuiltInEventType } from "../../events/event-types.js";
import type { Clock } from "../../shared/clock.js";
import { findModuleRoute } from "../../sdk/module/route-dispatch.js";
import type { ModuleEvent } from "../../sdk/module/types.js";
import { changedBindings, requirementKey, resolveCapabilities, type Binding, type OfferedCapability, type Requirement } from "./capability-resolver.js";
import type { LeakTracker } from "./leak-tracker.js";
import { answerModuleRpc, type ModuleRpcContext, type ModuleSubscription } from "./module-rpc.js";
import { ModuleRuntime, type LoadableModule } from "./module-runtime.js";
import type { ModuleStorageHost } from "./module-storage.js";
import type { ModuleWorkerTuning } from "./module-worker.js";
import { SerialQueue } from "./serial.js";

/** What one resolution pass did, for the `cloud_capabilities_*` metrics. */
export interface ResolutionPass {
  latencyMs: number;
  unresolved: number;
  rebindings: number;
  deprecatedResolutions: number;
}

export interface ModuleManagerDeps {
  controllerId: string;
  tuning: ModuleWorkerTuning;
  clock: Clock;
  logs: LogService;
  storage: ModuleStorageHost;
  /** Publishes on this controller's bus (journaled for the whole cluster). */
  publish(type: string, data: Record<string, unknown>, source: string, timestamp: string | null): void;
  runUnderLease: ModuleRpcContext["runUnderLease"];
  leaks: LeakTracker;
  onResolution?(pass: ResolutionPass): void;
}

/** Whether an operation announces its CAPABILITY_* events: only where it was asked for (once per cluster). */
export interface OperationOptions {
  announce: boolean;
}

/** A route found for a request. */
export interface RouteMatch {
  runtime: ModuleRuntime;
  index: number;
  params: Record<string, string>;
}

const LIVE_WORKER_STATES = new Set(["UNRESOLVED", "STARTING", "ACTIVE", "RELOADING"]);

/** See the module comment. */
export class ModuleManager {
  private readonly runtimes = new Map<string, ModuleRuntime>();
  private readonly queue = new SerialQueue();
  private readonly subscriptionsOf = new Map<string, Map<number, ModuleSubscription>>();
  private readonly leaseRunsOf = new Map<string, Map<number, (error: unknown) => void>>();
  private bindings = new Map<string, Binding | null>();
  private readonly rpc: ModuleRpcContext;

  constructor(private readonly deps: ModuleManagerDeps) {
    this.rpc = {
      storage: deps.storage,
      subscriptions: (id) => this.table(this.subscriptionsOf, id),
      publish: deps.publish,
      boundProvider: (consumer, capabilityId) => {
        const binding = this.bindings.get(requirementKey(consumer.id, capabilityId));
        const provider = binding ? this.runtimes.get(binding.moduleId) : undefined;
        return provider?.state === "ACTIVE" ? provider : null;
      },
      runUnderLease: deps.runUnderLease,
      leaseRuns: (id) => this.table(this.leaseRunsOf, id),
    };
  }

  /** Every module on this controller. */
  list(): ModuleRuntime[] {
    return [...this.runtimes.values()];
  }

  get(id: string): ModuleRuntime | undefined {
    return this.runtimes.get(id);
  }

  /** The binding of each requirement (`<module> <capability>`), null when unresolved. */
  currentBindings(): ReadonlyMap<string, Binding | null> {
    return this.bindings;
  }

  /** Installs and (when its requirements resolve) starts a module. */
  install(module: LoadableModule, options: OperationOptions): Promise<ModuleRuntime> {
    return this.queue.run("modules", async () => {
      const id = module.manifest.id;
      if (this.runtimes.has(id)) throw new Error(`module ${id} is already loaded here`);
      const runtime = new ModuleRuntime(module, {
        controllerId: this.deps.controllerId,
        tuning: this.deps.tuning,
        clock: this.deps.clock,
        logger: this.deps.logs.logger(`cloud.modules.${id}`),
        rpc: (r, op, args) => answerModuleRpc(this.rpc, r, op, args),
        onFailed: (r) => this.afterFailure(r),
        retire: (r, worker) => this.deps.leaks.track(r.id, r.version, worker),
      });
      this.runtimes.set(id, runtime);
      await runtime.install();
      await this.resolvePass();
      if (options.announce && runtime.state !== "FAILED")
        for (const offer of module.manifest.capabilities.provides)
          this.announce(EventTypes.CAPABILITY_REGISTERED, { capabilityId: offer.id, version: offer.version, moduleId: id });
      return runtime;
    });
  }

  /** Upgrades a loaded module to `next` (a new worker); announces the provider changes. */
  upgrade(next: LoadableModule, options: OperationOptions): Promise<ModuleRuntime> {
    return this.queue.run("modules", async () => {
      const runtime = this.required(next.manifest.id);
      const before = runtime.module.manifest.capabilities.provides;
      this.forget(runtime.id);
      await runtime.upgradeTo(next);
      await this.resolvePass();
      if (options.announce && runtime.state !== "FAILED") {
        const after = next.manifest.capabilities.provides;
        for (const offer of after) {
          const old = before.find((o) => o.id === offer.id);
          if (!old) this.announce(EventTypes.CAPABILITY_REGISTERED, { capabilityId: offer.id, version: offer.version, moduleId: runtime.id });
          else if (old.version !== offer.version)
            this.announce(EventTypes.CAPABILITY_PROVIDER_CHANGED, {
              capabilityId: offer.id,
              moduleId: runtime.id,
              fromVersion: old.version,
              toVersion: offer.version,
            });
        }
        for (const old of before)
          if (!after.some((o) => o.id === old.id)) this.announce(EventTypes.CAPABILITY_UNREGISTERED, { capabilityId: old.id, moduleId: runtime.id });
      }
      return runtime;
    });
  }

  /** Stops, unloads and forgets a module. */
  remove(id: string, options: OperationOptions): Promise<void> {
    return this.queue.run("modules", async () => {
      const runtime = this.runtimes.get(id);
      if (!runtime) return;
      await runtime.remove();
      this.runtimes.delete(id);
      this.forget(id);
      await this.resolvePass();
      if (options.announce)
        for (const offer of runtime.module.manifest.capabilities.provides)
          this.announce(EventTypes.CAPABILITY_UNREGISTERED, { capabilityId: offer.id, moduleId: id });
    });
  }

  /**
   * Restarts every module (after a restore replaced their storage): a reloadable one takes the
   * reload fast path in its worker, any other (and a FAILED one) a new worker with the same bundle.
   */
  restartAll(): Promise<void> {
    return this.queue.run("modules", async () => {
      for (const runtime of this.runtimes.values()) {
        if (runtime.module.manifest.backend.controller?.reloadable && (await runtime.reload())) continue;
        this.forget(runtime.id);
        await runtime.upgradeTo(runtime.module);
      }
      await this.resolvePass();
    });
  }

  /** Stops every module (controller shutdown); nothing is announced. */
  async stopAll(): Promise<void> {
    for (const id of [...this.runtimes.keys()]) await this.remove(id, { announce: false });
  }

  /** The route of `moduleId` for a request, or null (no such module, no routes, no match). */
  route(moduleId: string, method: string, segments: readonly string[]): RouteMatch | null {
    const runtime = this.runtimes.get(moduleId);
    if (!runtime?.routed) return null;
    const found = findModuleRoute(runtime.routes, method, segments);
    return found && { runtime, index: found.index, params: found.params };
  }

  /** Hands an event of the cluster's journal to every module subscribed to it. */
  deliver(event: ModuleEvent): void {
    const custom = !isBuiltInEventType(event.type);
    for (const runtime of this.runtimes.values()) {
      if (!runtime.worker || !LIVE_WORKER_STATES.has(runtime.state)) continue;
      const subscriptions = this.subscriptionsOf.get(runtime.id);
      if (!subscriptions) continue;
      const matching: number[] = [];
      for (const [id, subscription] of subscriptions) {
        if (subscription.kind === "all" || (subscription.type === event.type && (subscription.kind === "type" || custom))) matching.push(id);
      }
      if (matching.length > 0) runtime.worker.deliver(matching, event);
    }
  }

  private announce(type: string, data: Record<string, unknown>): void {
    this.deps.publish(type, data, this.deps.controllerId, null);
  }

  private required(id: string): ModuleRuntime {
    const runtime = this.runtimes.get(id);
    if (!runtime) throw new Error(`module ${id} is not loaded here`);
    return runtime;
  }

  private table<T>(tables: Map<string, Map<number, T>>, id: string): Map<number, T> {
    let table = tables.get(id);
    if (!table) tables.set(id, (table = new Map()));
    return table;
  }

  /** Drops a module's subscriptions and ends its lease runs (its worker is gone or being replaced). */
  private forget(id: string): void {
    this.subscriptionsOf.delete(id);
    const runs = this.leaseRunsOf.get(id);
    this.leaseRunsOf.delete(id);
    for (const done of runs?.values() ?? []) done(new Error("the module stopped"));
  }

  private afterFailure(runtime: ModuleRuntime): void {
    this.forget(runtime.id);
    // Consumers of what it provided lose their provider; queued, so it runs after the operation under way.
    void this.queue.run("modules", () => this.resolvePass());
  }

  /** Binds requirements, then starts the newly resolved and suspends the newly unresolved, until nothing changes. */
  private async resolvePass(): Promise<void> {
    const startedMs = this.deps.clock.nowMs();
    let rebindings = 0;
    let deprecatedResolutions = 0;
    for (let round = 0; round <= this.runtimes.size; round++) {
      const offers: OfferedCapability[] = [];
      const requirements: Requirement[] = [];
      for (const runtime of this.runtimes.values()) {
        const { provides, requires } = runtime.module.manifest.capabilities;
        if (runtime.state === "ACTIVE")
          for (const offer of provides) if (runtime.provided.includes(offer.id)) offers.push({ moduleId: runtime.id, capabilityId: offer.id, ...offer });
        if (runtime.routed)
          for (const requirement of requires) requirements.push({ moduleId: runtime.id, capabilityId: requirement.id, versionRange: requirement.versionRange });
      }
      const bindings = resolveCapabilities(offers, requirements);
      for (const change of changedBindings(this.bindings, bindings)) {
        if (change.before) rebindings++;
        if (change.after?.deprecated) deprecatedResolutions++;
        const [consumerId, capabilityId] = change.key.split(" ");
        this.runtimes.get(consumerId)?.worker?.rebind(capabilityId, change.after);
      }
      this.bindings = bindings;
      let changed = false;
      for (const runtime of this.runtimes.values()) {
        const resolved = runtime.module.manifest.capabilities.requires.every((r) => bindings.get(requirementKey(runtime.id, r.id)));
        if (runtime.state === "UNRESOLVED" && resolved) {
          await runtime.start();
          changed = true;
        } else if (runtime.state === "ACTIVE" && !resolved) {
          await runtime.suspend();
          changed = true;
        }
      }
      if (!changed) break;
    }
    const unresolved = [...this.bindings.values()].filter((binding) => binding === null).length;
    this.deps.onResolution?.({ latencyMs: this.deps.clock.nowMs() - startedMs, unresolved, rebindings, deprecatedResolutions });
  }
}

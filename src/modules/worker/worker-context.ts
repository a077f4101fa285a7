/**
 * The {@link ModuleContext} a module is given inside its worker: logger, event bus, storage handles,
 * capabilities and the cluster's singleton lease, each a thin client of its controller over
 * {@link WorkerRpc}. What the manifest does not declare is refused here already (an undeclared
 * storage handle, a capability it neither provides nor requires); the controller checks again.
 */
import { CapabilityUnavailableError, IllegalStateError, InvalidArgumentError, UndeclaredStorageError } from "../../sdk/module/errors.js";
import type {
  CapabilityClient,
  CapabilityHandle,
  DocumentStorage,
  KeyValueStorage,
  ModuleCapabilities,
  ModuleCluster,
  ModuleCollection,
  ModuleContext,
  ModuleDocument,
  ModuleLogger,
  SingletonLease,
} from "../../sdk/module/types.js";
import type { WireProvider, WorkerInit } from "./protocol.js";
import { WorkerEventBus } from "./worker-events.js";
import { wireError, type WorkerRpc } from "./worker-rpc.js";

/** A lease job waiting for its grant, and the abort of the one running. */
interface LeaseRun {
  job: (lease: SingletonLease) => Promise<void> | void;
  abort: AbortController;
}

/** The context and the state the worker's message loop needs from it. */
export class WorkerContext {
  readonly context: ModuleContext;
  readonly events: WorkerEventBus;
  private readonly handles = new Map<string, CapabilityHandle>();
  private readonly providers = new Map<string, WireProvider | null>();
  private readonly rebindListeners: ((capabilityId: string, provider: { moduleId: string; version: string } | null) => void)[] = [];
  private readonly leaseRuns = new Map<number, LeaseRun>();
  private nextLeaseRun = 1;
  private loaded = false;

  constructor(
    private readonly init: WorkerInit,
    private readonly rpc: WorkerRpc,
  ) {
    const logger: ModuleLogger = {
      debug: (message) => rpc.post({ t: "log", level: "debug", message: String(message) }),
      info: (message) => rpc.post({ t: "log", level: "info", message: String(message) }),
      warn: (message) => rpc.post({ t: "log", level: "warn", message: String(message) }),
      error: (message) => rpc.post({ t: "log", level: "error", message: String(message) }),
    };
    this.events = new WorkerEventBus(rpc, logger);
    this.context = Object.freeze({
      moduleId: init.moduleId,
      version: init.version,
      logger,
      events: this.events,
      storage: Object.freeze({ documents: () => this.documents(), kv: () => this.kv() }),
      capabilities: this.capabilities(),
      cluster: this.cluster(),
    });
  }

  /** The load hook finished: `provide` is closed. */
  markLoaded(): void {
    this.loaded = true;
  }

  /** The capability ids given a handle. */
  providedIds(): string[] {
    return [...this.handles.keys()];
  }

  /** Runs a consumer's call on a handle this module provides. */
  async callProvided(capabilityId: string, method: string, args: unknown[]): Promise<unknown> {
    const handle = this.handles.get(capabilityId);
    if (!handle) throw new CapabilityUnavailableError(`${this.init.moduleId} has no handle for ${capabilityId}`);
    const fn = (handle as Record<string, unknown>)[method];
    if (typeof fn !== "function" || method === "constructor" || method.startsWith("__"))
      throw new InvalidArgumentError(`capability ${capabilityId} has no method ${method}`);
    return await (fn as (...a: unknown[]) => unknown).apply(handle, args);
  }

  rebind(capabilityId: string, provider: WireProvider | null): void {
    this.providers.set(capabilityId, provider);
    for (const listener of this.rebindListeners) {
      try {
        listener(capabilityId, provider && { moduleId: provider.moduleId, version: provider.version });
      } catch (error) {
        this.context.logger.error(`Rebind listener failed: ${(error as Error).message}`);
      }
    }
  }

  leaseGranted(run: number, name: string, fencingToken: number): void {
    const lease = this.leaseRuns.get(run);
    if (!lease) return;
    void (async () => {
      let error: unknown;
      try {
        await lease.job({ name, fencingToken, signal: lease.abort.signal });
      } catch (caught) {
        error = caught;
        this.context.logger.error(`Singleton job ${name} failed: ${caught instanceof Error ? (caught.stack ?? caught.message) : String(caught)}`);
      }
      await this.rpc.call("lease.done", run, error === undefined ? null : wireError(error)).catch(() => undefined);
    })();
  }

  leaseLost(run: number, reason: string): void {
    this.leaseRuns.get(run)?.abort.abort(new Error(reason));
  }

  private documents(): DocumentStorage {
    if (!this.init.storage.mongo) throw new UndeclaredStorageError(`${this.init.moduleId} did not declare storage.mongo: true`);
    const rpc = this.rpc;
    return {
      collection(name: string): ModuleCollection {
        return {
          insert: (doc: ModuleDocument) => rpc.call("documents.insert", name, doc),
          put: (doc: ModuleDocument) => rpc.call("documents.put", name, doc),
          get: (id: string) => rpc.call("documents.get", name, id),
          delete: (id: string) => rpc.call("documents.delete", name, id),
          find: (filter, options) => rpc.call("documents.find", name, filter ?? {}, options ?? {}),
          count: (filter) => rpc.call("documents.count", name, filter ?? {}),
        };
      },
    };
  }

  private kv(): KeyValueStorage {
    if (!this.init.storage.redis) throw new UndeclaredStorageError(`${this.init.moduleId} did not declare storage.redis: true`);
    const rpc = this.rpc;
    return {
      get: (key) => rpc.call("kv.get", key),
      set: (key, value, options) => rpc.call("kv.set", key, value, options?.ttlMs ?? null),
      delete: (key) => rpc.call("kv.delete", key),
      keys: (prefix) => rpc.call("kv.keys", prefix ?? ""),
      increment: (key) => rpc.call("kv.increment", key),
    };
  }

  private capabilities(): ModuleCapabilities {
    return Object.freeze({
      provide: (id: string, handle: CapabilityHandle) => {
        if (!this.init.provides.includes(id)) throw new InvalidArgumentError(`capability ${id} is not in capabilities.provides of the manifest`);
        if (this.loaded) throw new IllegalStateError(`capability ${id}: provide is called in the load hook`);
        if (typeof handle !== "object" || handle === null) throw new InvalidArgumentError(`capability ${id}: the handle must be an object of methods`);
        this.handles.set(id, handle);
      },
      require: (id: string): CapabilityClient => {
        if (!this.init.requires.includes(id)) throw new InvalidArgumentError(`capability ${id} is not in capabilities.requires of the manifest`);
        return {
          id,
          provider: () => this.providers.get(id) ?? null,
          call: <R>(method: string, ...args: unknown[]) => this.rpc.call<R>("capability.call", id, method, args),
        };
      },
      onRebind: (listener: Parameters<ModuleCapabilities["onRebind"]>[0]) => {
        if (typeof listener === "function") this.rebindListeners.push(listener);
      },
    });
  }

  private cluster(): ModuleCluster {
    return Object.freeze({
      controllerId: this.init.controllerId,
      runExclusive: async (name: string, ttlMs: number, job: (lease: SingletonLease) => Promise<void> | void) => {
        if (typeof job !== "function") throw new InvalidArgumentError("runExclusive needs a job function");
        const run = this.nextLeaseRun++;
        this.leaseRuns.set(run, { job, abort: new AbortController() });
        try {
          return await this.rpc.call<boolean>("lease.run", run, name, ttlMs);
        } finally {
          this.leaseRuns.delete(run);
        }
      },
    });
  }
}

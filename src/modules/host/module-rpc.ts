/**
 * Answers what a module's worker asks of the controller: storage operations (checked against the
 * manifest, `module-storage.ts`), event subscriptions and publications, capability calls (routed to
 * the provider bound to the requirement) and singleton-lease runs. Whatever a module sends is
 * checked here again: the worker is the module's code, not the platform's.
 */
import { CapabilityUnavailableError, InvalidArgumentError } from "../../sdk/module/errors.js";
import { isBuiltInEventType } from "../../events/event-types.js";
import type { RpcOp, SubscriptionKind } from "../worker/protocol.js";
import type { ModuleRuntime } from "./module-runtime.js";
import type { ModuleStorageHost } from "./module-storage.js";
import { WorkerCallFailed } from "./module-worker.js";
import { moduleErrorOf } from "../../sdk/module/errors.js";

/** Custom event types look like MODULE:ACTION. */
const CUSTOM_TYPE = /^[A-Za-z0-9_.-]+:[A-Za-z0-9_.-]+$/;
/** Largest payload of a custom event a module publishes (bytes of JSON). */
export const MODULE_EVENT_PAYLOAD_BYTES_MAX = 64 * 1024;
/** Subscriptions one module may hold. */
export const MODULE_SUBSCRIPTIONS_MAX = 1_000;
const LEASE_NAME = /^[a-z0-9][a-z0-9-]{0,62}$/;
const LEASE_TTL_MS = { min: 1_000, max: 3_600_000 };

/** A subscription of a module. */
export interface ModuleSubscription {
  kind: SubscriptionKind;
  type: string;
}

/** What the answers need from the manager and the controller. */
export interface ModuleRpcContext {
  storage: ModuleStorageHost;
  /** The module's subscriptions (id → subscription). */
  subscriptions(moduleId: string): Map<number, ModuleSubscription>;
  /** Publishes a custom event on this controller's bus (journaled for the whole cluster). */
  publish(type: string, data: Record<string, unknown>, source: string, timestamp: string | null): void;
  /** The provider runtime bound to `consumer`'s requirement `capabilityId`, or null. */
  boundProvider(consumer: ModuleRuntime, capabilityId: string): ModuleRuntime | null;
  /** The Raft singleton lease. */
  runUnderLease(name: string, ttlMs: number, fn: (lease: { fencingToken: number; signal: AbortSignal }) => Promise<void>): Promise<boolean>;
  /** Lease runs of a module waiting for `lease.done` (resolved by it, or when the module goes away). */
  leaseRuns(moduleId: string): Map<number, (error: unknown) => void>;
}

/** Answers one call of `runtime`'s worker. */
export async function answerModuleRpc(ctx: ModuleRpcContext, runtime: ModuleRuntime, op: RpcOp, args: unknown[]): Promise<unknown> {
  const grant = runtime.module.manifest;
  const { storage } = ctx;
  switch (op) {
    case "documents.insert":
      return storage.insertDocument(grant, args[0], args[1]);
    case "documents.put":
      return storage.putDocument(grant, args[0], args[1]);
    case "documents.get":
      return storage.getDocument(grant, args[0], args[1]);
    case "documents.delete":
      return storage.deleteDocument(grant, args[0], args[1]);
    case "documents.find":
      return storage.findDocuments(grant, args[0], args[1], args[2]);
    case "documents.count":
      return storage.countDocuments(grant, args[0], args[1]);
    case "kv.get":
      return storage.getKey(grant, args[0]);
    case "kv.set":
      return storage.setKey(grant, args[0], args[1], args[2]);
    case "kv.delete":
      return storage.deleteKey(grant, args[0]);
    case "kv.keys":
      return storage.listKeys(grant, args[0]);
    case "kv.increment":
      return storage.incrementKey(grant, args[0]);
    case "events.subscribe": {
      const [id, kind, type] = args;
      const subscriptions = ctx.subscriptions(runtime.id);
      if (!Number.isSafeInteger(id) || !["type", "custom-type", "all"].includes(kind as string) || typeof type !== "string")
        throw new InvalidArgumentError("malformed subscription");
      if (subscriptions.size >= MODULE_SUBSCRIPTIONS_MAX) throw new InvalidArgumentError(`a module holds at most ${MODULE_SUBSCRIPTIONS_MAX} subscriptions`);
      subscriptions.set(id as number, { kind: kind as SubscriptionKind, type });
      return null;
    }
    case "events.unsubscribe":
      ctx.subscriptions(runtime.id).delete(args[0] as number);
      return null;
    case "events.publish": {
      const [type, payload, timestamp] = args;
      if (typeof type !== "string" || !CUSTOM_TYPE.test(type) || isBuiltInEventType(type))
        throw new InvalidArgumentError(`a module publishes custom events only, typed MODULE:ACTION (got ${JSON.stringify(type)})`);
      const data = payload === null || payload === undefined ? {} : payload;
      if (typeof data !== "object" || Array.isArray(data)) throw new InvalidArgumentError("an event payload is an object");
      if (Buffer.byteLength(JSON.stringify(data)) > MODULE_EVENT_PAYLOAD_BYTES_MAX)
        throw new InvalidArgumentError(`an event payload is at most ${MODULE_EVENT_PAYLOAD_BYTES_MAX} bytes of JSON`);
      const at = typeof timestamp === "string" && !Number.isNaN(Date.parse(timestamp)) ? new Date(timestamp).toISOString() : null;
      ctx.publish(type, data as Record<string, unknown>, `module:${runtime.id}`, at);
      return null;
    }
    case "capability.call": {
      const [capabilityId, method, callArgs] = args;
      if (typeof capabilityId !== "string" || !grant.capabilities.requires.some((r) => r.id === capabilityId))
        throw new InvalidArgumentError(`capability ${String(capabilityId)} is not in capabilities.requires of the manifest`);
      if (typeof method !== "string" || !Array.isArray(callArgs)) throw new InvalidArgumentError("malformed capability call");
      const provider = ctx.boundProvider(runtime, capabilityId);
      if (!provider?.worker) throw new CapabilityUnavailableError(`capability ${capabilityId} has no provider in range`);
      try {
        return await provider.worker.callCapability(capabilityId, method, callArgs);
      } catch (error) {
        if (error instanceof WorkerCallFailed && error.kind === "refused") throw moduleErrorOf(error.wire?.kind, error.wire?.message ?? error.message);
        throw new CapabilityUnavailableError(`capability ${capabilityId}: ${(error as Error).message}`);
      }
    }
    case "lease.run": {
      const [run, name, ttlMs] = args;
      if (!Number.isSafeInteger(run) || typeof name !== "string" || !LEASE_NAME.test(name))
        throw new InvalidArgumentError(`a lease name matches ${LEASE_NAME.source}`);
      if (!Number.isSafeInteger(ttlMs) || (ttlMs as number) < LEASE_TTL_MS.min || (ttlMs as number) > LEASE_TTL_MS.max)
        throw new InvalidArgumentError(`a lease TTL is ${LEASE_TTL_MS.min} to ${LEASE_TTL_MS.max} ms`);
      const fullName = `module:${runtime.id}:${name}`;
      const runs = ctx.leaseRuns(runtime.id);
      return ctx.runUnderLease(fullName, ttlMs as number, async (lease) => {
        const worker = runtime.worker;
        if (!worker) return;
        const done = new Promise<unknown>((resolve) => runs.set(run as number, resolve));
        const lost = () => worker.leaseLost(run as number, "the singleton lease was lost");
        lease.signal.addEventListener("abort", lost, { once: true });
        worker.leaseGranted(run as number, fullName, lease.fencingToken);
        try {
          await done;
        } finally {
          lease.signal.removeEventListener("abort", lost);
          runs.delete(run as number);
        }
      });
    }
    case "lease.done":
      ctx.leaseRuns(runtime.id).get(args[0] as number)?.(args[1]);
      return null;
  }
}

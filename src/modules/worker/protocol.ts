/**
 * The messages between a controller and one module's worker thread. Types only: the host
 * (`host/module-worker.ts`) and the worker (`worker-main.ts`) both import them. Values cross by
 * structured clone; errors cross as {@link WireError} (kind and message), never as Error objects.
 */
import type { RequestData, ResponseData } from "../../sdk/module/request.js";
import type { ModuleEvent } from "../../sdk/module/types.js";

/** The lifecycle hooks of spec document 3, "States and transitions". */
export type HookName = "load" | "registerRoutes" | "start" | "stop" | "unload" | "upgrade" | "reload";

/** What a worker is started with (`workerData`). */
export interface WorkerInit {
  moduleId: string;
  version: string;
  /** Absolute path of the backend's entry file. */
  entryFile: string;
  exportName: string;
  controllerId: string;
  storage: { mongo: boolean; redis: boolean };
  /** Capability ids the manifest provides and requires. */
  provides: string[];
  requires: string[];
  /** How often the worker reports that its event loop turns. */
  heartbeatIntervalMs: number;
}

/** An error as it crosses the boundary: the SDK kind (when it is one) and the message. */
export interface WireError {
  kind?: string;
  message: string;
}

/** A route as the worker registered it. */
export interface WireRoute {
  method: string;
  template: string;
}

/** A capability's bound provider, as a consumer is told. */
export interface WireProvider {
  moduleId: string;
  version: string;
  deprecated: boolean;
}

/** Host to worker. */
export type HostMessage =
  | { t: "hook"; id: number; hook: HookName; fromVersion?: string }
  | { t: "request"; id: number; route: number; request: RequestData }
  | { t: "event"; subscriptions: number[]; event: ModuleEvent }
  | { t: "reply"; id: number; ok: true; value: unknown }
  | { t: "reply"; id: number; ok: false; error: WireError }
  | { t: "capability-call"; id: number; capabilityId: string; method: string; args: unknown[] }
  | { t: "rebind"; capabilityId: string; provider: WireProvider | null }
  | { t: "lease-granted"; run: number; name: string; fencingToken: number }
  | { t: "lease-lost"; run: number; reason: string }
  | { t: "shutdown" };

/** What a hook answers with. */
export interface HookResult {
  /** After registerRoutes: the routes in registration order. */
  routes?: WireRoute[];
  /** After load: the capability ids the module gave a handle for. */
  provided?: string[];
}

/** Operations a worker asks of its controller. */
export type RpcOp =
  | "documents.insert"
  | "documents.put"
  | "documents.get"
  | "documents.delete"
  | "documents.find"
  | "documents.count"
  | "kv.get"
  | "kv.set"
  | "kv.delete"
  | "kv.keys"
  | "kv.increment"
  | "events.subscribe"
  | "events.unsubscribe"
  | "events.publish"
  | "capability.call"
  | "lease.run"
  | "lease.done";

/** Worker to host. */
export type WorkerMessage =
  | { t: "beat"; heapUsedBytes: number; heapLimitBytes: number }
  | { t: "hook-done"; id: number; ok: true; result: HookResult }
  | { t: "hook-done"; id: number; ok: false; error: WireError }
  | { t: "response"; id: number; response: ResponseData }
  | { t: "rpc"; id: number; op: RpcOp; args: unknown[] }
  | { t: "capability-result"; id: number; ok: true; value: unknown }
  | { t: "capability-result"; id: number; ok: false; error: WireError }
  | { t: "log"; level: "debug" | "info" | "warn" | "error"; message: string };

/** Subscription kinds of the event bus contract. */
export type SubscriptionKind = "type" | "custom-type" | "all";

/**
 * A harness for a module's own tests (run with node:test): the module's hooks run in
 * the test's process against an in-memory context (documents, keys, a local event bus, capabilities
 * given by the test, a singleton lease that is always granted), and requests go through the same
 * route rules and error mapping as on a controller. What it does not show: the worker boundary, the
 * controller's quotas on several controllers, other modules' events.
 */
import { StorageQuotaError, UndeclaredStorageError } from "./errors.js";
import { findModuleRoute } from "./route-dispatch.js";
import { ModuleRouteTable } from "./route-registrar.js";
import { pathSegmentsOf } from "./route-template.js";
import { runModuleRoute } from "./route-dispatch.js";
import type { ResponseData } from "./request.js";
import type {
  CapabilityHandle,
  CloudModule,
  DocumentFilter,
  ModuleCollection,
  ModuleContext,
  ModuleDocument,
  ModuleEvent,
  ModuleEventHandler,
} from "./types.js";

export interface HarnessOptions {
  moduleId?: string;
  version?: string;
  storage?: { mongo?: boolean; redis?: boolean; mongoDocuments?: number; redisKeys?: number };
  /** Handles of the capabilities the module requires, by id. */
  capabilities?: Record<string, CapabilityHandle>;
}

/** A started module and how to reach it. */
export interface ModuleHarness {
  context: ModuleContext;
  /** Calls a route: `path` is the part after `/api/v1/modules/<id>/` (a query string is read). */
  request(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<ResponseData & { json(): any }>;
  /** Publishes an event to the module's subscriptions (as the controller would). */
  emit(type: string, data?: Record<string, unknown>): Promise<void>;
  /** Custom events the module published. */
  published: { type: string; payload: Record<string, unknown> }[];
  /** Runs the stop and unload hooks. */
  stop(): Promise<void>;
}

function matches(doc: ModuleDocument, filter: DocumentFilter = {}): boolean {
  return Object.entries(filter).every(([field, condition]) => {
    const value = doc[field] as string | number;
    if (condition === null || typeof condition !== "object") return value === condition;
    return (
      (condition.$gt === undefined || value > condition.$gt) &&
      (condition.$gte === undefined || value >= condition.$gte) &&
      (condition.$lt === undefined || value < condition.$lt) &&
      (condition.$lte === undefined || value <= condition.$lte) &&
      (condition.$in === undefined || condition.$in.includes(value))
    );
  });
}

/** Loads, registers and starts `module` in memory. */
export async function startModuleHarness(module: CloudModule, options: HarnessOptions = {}): Promise<ModuleHarness> {
  const moduleId = options.moduleId ?? "test-module";
  const storage = { mongo: true, redis: true, mongoDocuments: 0, redisKeys: 0, ...options.storage };
  const collections = new Map<string, Map<string, ModuleDocument>>();
  const keys = new Map<string, string>();
  const handlers: { type: string | null; handler: ModuleEventHandler; filters: ((e: ModuleEvent) => boolean)[] }[] = [];
  const published: ModuleHarness["published"] = [];
  let sequence = 0;
  const documentCount = () => [...collections.values()].reduce((sum, c) => sum + c.size, 0);
  const collection = (name: string): ModuleCollection => {
    if (!collections.has(name)) collections.set(name, new Map());
    const docs = collections.get(name)!;
    const room = (id: string) => {
      if (storage.mongoDocuments > 0 && !docs.has(id) && documentCount() >= storage.mongoDocuments)
        throw new StorageQuotaError(`storage.limits.mongoDocuments is ${storage.mongoDocuments}`);
    };
    return {
      insert: async (doc) => {
        if (docs.has(doc._id)) throw new Error(`Duplicate key in ${name}: ${doc._id}`);
        room(doc._id);
        docs.set(doc._id, structuredClone(doc));
      },
      put: async (doc) => {
        room(doc._id);
        docs.set(doc._id, structuredClone(doc));
      },
      get: async (id) => structuredClone(docs.get(id) ?? null),
      delete: async (id) => docs.delete(id),
      find: async (filter, findOptions) => {
        let found = [...docs.values()].filter((doc) => matches(doc, filter));
        const sort = findOptions?.sort;
        if (sort)
          found.sort(
            (a, b) =>
              ((a[sort.field] as string) < (b[sort.field] as string) ? -1 : (a[sort.field] as string) > (b[sort.field] as string) ? 1 : 0) * sort.direction,
          );
        found = found.slice(findOptions?.skip ?? 0, (findOptions?.skip ?? 0) + (findOptions?.limit ?? 1000));
        return structuredClone(found);
      },
      count: async (filter) => [...docs.values()].filter((doc) => matches(doc, filter)).length,
    };
  };
  const context: ModuleContext = {
    moduleId,
    version: options.version ?? "0.0.0",
    logger: { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} },
    events: {
      on(type) {
        const filters: ((e: ModuleEvent) => boolean)[] = [];
        const builder = {
          filter: (predicate: (e: ModuleEvent) => boolean) => (filters.push(predicate), builder),
          field: (name: string, value: unknown) => (filters.push((e) => e.data[name] === value), builder),
          subscribe: (handler: ModuleEventHandler) => add(type, handler, filters),
        };
        return builder;
      },
      subscribe: (type, handler) => add(type, handler, []),
      subscribeByType: (type, handler) => add(type, handler, []),
      subscribeAll: (handler) => add(null, handler, []),
      publish: (event) => void published.push({ type: event.type, payload: event.payload ?? {} }),
    },
    storage: {
      documents: () => {
        if (!storage.mongo) throw new UndeclaredStorageError("storage.mongo is not declared");
        return { collection };
      },
      kv: () => {
        if (!storage.redis) throw new UndeclaredStorageError("storage.redis is not declared");
        const room = (key: string) => {
          if (storage.redisKeys > 0 && !keys.has(key) && keys.size >= storage.redisKeys)
            throw new StorageQuotaError(`storage.limits.redisKeys is ${storage.redisKeys}`);
        };
        return {
          get: async (key) => keys.get(key) ?? null,
          set: async (key, value) => {
            room(key);
            keys.set(key, value);
          },
          delete: async (key) => keys.delete(key),
          keys: async (prefix = "") => [...keys.keys()].filter((k) => k.startsWith(prefix)).sort(),
          increment: async (key) => {
            room(key);
            const next = Number(keys.get(key) ?? "0") + 1;
            keys.set(key, String(next));
            return next;
          },
        };
      },
    },
    capabilities: {
      provide: () => {},
      require: (id) => ({
        id,
        provider: () => (options.capabilities?.[id] ? { moduleId: "test", version: "0.0.0", deprecated: false } : null),
        call: async (method, ...args) => (options.capabilities?.[id]?.[method] as (...a: unknown[]) => unknown)(...args) as never,
      }),
      onRebind: () => {},
    },
    cluster: {
      controllerId: "test-controller",
      runExclusive: async (name, _ttlMs, job) => {
        await job({ name, fencingToken: 1, signal: new AbortController().signal });
        return true;
      },
    },
  };
  function add(type: string | null, handler: ModuleEventHandler, filters: ((e: ModuleEvent) => boolean)[]) {
    const entry = { type, handler, filters: [...filters] };
    handlers.push(entry);
    return { unsubscribe: () => void handlers.splice(handlers.indexOf(entry), 1) };
  }
  await module.load?.(context);
  const table = new ModuleRouteTable();
  await module.registerRoutes?.(table, context);
  table.close();
  await module.start?.(context);
  return {
    context,
    published,
    async request(method, path, body, headers = {}) {
      const url = new URL(path.replace(/^\//, ""), "http://module/");
      const segments = pathSegmentsOf(url.pathname.slice(1)) ?? [];
      const found = findModuleRoute(table.routes, method.toUpperCase(), segments);
      const query = Object.fromEntries([...url.searchParams.keys()].map((k) => [k, url.searchParams.get(k)!]));
      const answer: ResponseData = found
        ? await runModuleRoute(
            table.routes[found.index],
            {
              method: method.toUpperCase(),
              path: `/api/v1/modules/${moduleId}${url.pathname}`,
              pathParams: found.params,
              query,
              headers,
              body: body === undefined ? undefined : new TextEncoder().encode(typeof body === "string" ? body : JSON.stringify(body)),
            },
            () => {},
          )
        : {
            status: 404,
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ error: { code: "NOT_FOUND", message: "Module route not found", status: 404 } }),
            sent: true,
          };
      return { ...answer, json: () => (answer.body === "" ? undefined : JSON.parse(answer.body)) };
    },
    async emit(type, data = {}) {
      const event: ModuleEvent = { type, source: "test", timestamp: new Date().toISOString(), data, sequence: ++sequence };
      for (const entry of [...handlers]) if ((entry.type === null || entry.type === type) && entry.filters.every((f) => f(event))) await entry.handler(event);
    },
    async stop() {
      await module.stop?.(context);
      await module.unload?.(context);
    },
  };
}

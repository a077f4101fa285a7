/**
 * What a platform module is and what it is given (spec document 3): the lifecycle hooks, the REST
 * objects (Request, Response, Handler, typed handler), route registration, the event bus, storage
 * handles, capabilities and the cluster's singleton lease. A module's backend is an ES module whose
 * export (named by the manifest's `entrypoint`, `file.js#Export`) is a {@link CloudModule} object or
 * a class whose instances are one (constructed without arguments).
 */

/** Methods a module route can be registered for (no HEAD or OPTIONS). */
export type RouteMethod = "GET" | "POST" | "PUT" | "DELETE" | "PATCH";

/** The incoming request of a module route. */
export interface ModuleRequest {
  /** GET, POST, PUT, DELETE or PATCH. */
  method(): string;
  /** The full path, `/api/v1/modules/<moduleId>/...`. */
  path(): string;
  /** The template's parameters (immutable). */
  pathParams(): Readonly<Record<string, string>>;
  /** The query, first value per key only (immutable). */
  queryParams(): Readonly<Record<string, string>>;
  /** The headers, names lower-cased (immutable). */
  headers(): Readonly<Record<string, string>>;
  /** The raw body (empty when none). */
  body(): Uint8Array;
  /** The body as UTF-8 text. */
  bodyText(): string;
  /**
   * The body parsed as JSON and, when given, checked by `type` (a parser that returns the value or
   * throws). Throws {@link InvalidArgumentError} when either fails (the handler then answers 422).
   */
  bodyAs<T = unknown>(type?: BodyType<T>): T;
  /** A path parameter; throws {@link InvalidArgumentError} when the template has none of that name. */
  pathParam(name: string): string;
  queryParam(name: string): string | undefined;
  header(name: string): string | undefined;
  /** The client-supplied `X-User-Id` header: not proof of identity. */
  userId(): string | undefined;
}

/** The response of a module route; status 200 unless set. */
export interface ModuleResponse {
  /** Sets the status (chainable). */
  status(code: number): ModuleResponse;
  /** Sets a header (chainable). */
  header(name: string, value: string): ModuleResponse;
  /** Sends `value` as JSON (`application/json`); terminal. */
  json(value: unknown): void;
  /** Sends text (`text/plain; charset=utf-8` unless a content type was set); terminal. */
  text(value: string): void;
}

/** Handles a request; may throw (see the SDK's errors for how a throw is answered). */
export type Handler = (request: ModuleRequest, response: ModuleResponse) => void | Promise<void>;

/** Handles a request whose JSON body was parsed and checked before the call. */
export type TypedHandler<T> = (request: ModuleRequest, body: T, response: ModuleResponse) => void | Promise<void>;

/**
 * Checks a parsed JSON body: a function returning the typed value (or throwing), or an object with
 * such a `parse` (a zod schema, for instance). Its error message becomes the 400's `details`.
 */
export type BodyType<T> = ((value: unknown) => T) | { parse(value: unknown): T };

/**
 * Registers the module's routes (rules 4 and 5): the first registered (method, template) that
 * matches wins; a typed body exists for post, put, patch and delete only; a null body type or
 * handler fails at registration. Registrations after the module started are ignored.
 */
export interface RouteRegistrar {
  get(template: string, handler: Handler): RouteRegistrar;
  post(template: string, handler: Handler): RouteRegistrar;
  post<T>(template: string, bodyType: BodyType<T>, handler: TypedHandler<T>): RouteRegistrar;
  put(template: string, handler: Handler): RouteRegistrar;
  put<T>(template: string, bodyType: BodyType<T>, handler: TypedHandler<T>): RouteRegistrar;
  patch(template: string, handler: Handler): RouteRegistrar;
  patch<T>(template: string, bodyType: BodyType<T>, handler: TypedHandler<T>): RouteRegistrar;
  delete(template: string, handler: Handler): RouteRegistrar;
  delete<T>(template: string, bodyType: BodyType<T>, handler: TypedHandler<T>): RouteRegistrar;
}

/** An event as a module sees it: built-in (SCREAMING_SNAKE_CASE) or custom (MODULE:ACTION). */
export interface ModuleEvent {
  readonly type: string;
  /** The publisher: a controller id, an instance id, or `module:<id>`. */
  readonly source: string;
  readonly timestamp: string;
  /** The event's fields (a custom event's payload). */
  readonly data: Readonly<Record<string, unknown>>;
  /** Its number in the cluster-wide event journal. */
  readonly sequence: number;
}

export type ModuleEventHandler = (event: ModuleEvent) => void | Promise<void>;

/** Keep it and unsubscribe in the stop hook: a dropped handle leaks its handler. */
export interface EventSubscription {
  unsubscribe(): void;
}

/** Filters are ANDed; then subscribe. */
export interface EventFilter {
  filter(predicate: (event: ModuleEvent) => boolean): EventFilter;
  field(name: string, value: unknown): EventFilter;
  subscribe(handler: ModuleEventHandler): EventSubscription;
}

/** A custom event to publish: `type` is MODULE:ACTION; a null payload is empty, a null timestamp now. */
export interface CustomCloudEvent {
  type: string;
  payload?: Record<string, unknown> | null;
  timestamp?: string | null;
}

/**
 * The event bus (spec document 3, "Bus contract"). A module sees the events of the whole cluster;
 * handlers run asynchronously, a throwing one is logged and isolated.
 */
export interface ModuleEventBus {
  on(type: string): EventFilter;
  /** A built-in type, unfiltered. */
  subscribe(type: string, handler: ModuleEventHandler): EventSubscription;
  /** Only custom events with that type string. */
  subscribeByType(type: string, handler: ModuleEventHandler): EventSubscription;
  subscribeAll(handler: ModuleEventHandler): EventSubscription;
  /** Fire-and-forget: publishes a custom event with `module:<id>` as its source. */
  publish(event: CustomCloudEvent): void;
}

/** A stored document: `_id` and JSON fields (`_c` is reserved). */
export interface ModuleDocument {
  _id: string;
  [field: string]: unknown;
}

/** Equality or a range per field; conditions are ANDed. */
export type DocumentFilter = Record<
  string,
  | string
  | number
  | boolean
  | null
  | { $gt?: string | number; $gte?: string | number; $lt?: string | number; $lte?: string | number; $in?: (string | number | boolean)[] }
>;

export interface DocumentFindOptions {
  sort?: { field: string; direction: 1 | -1 };
  skip?: number;
  limit?: number;
}

/** One collection of the module's namespace in the document store. */
export interface ModuleCollection {
  /** Inserts a new document; fails when `_id` exists. */
  insert(doc: ModuleDocument): Promise<void>;
  /** Inserts or replaces. */
  put(doc: ModuleDocument): Promise<void>;
  get(id: string): Promise<ModuleDocument | null>;
  delete(id: string): Promise<boolean>;
  find(filter?: DocumentFilter, options?: DocumentFindOptions): Promise<ModuleDocument[]>;
  count(filter?: DocumentFilter): Promise<number>;
}

/** The document storage of `storage.mongo: true` (quota `storage.limits.mongoDocuments`). */
export interface DocumentStorage {
  /** A collection; names match ^[a-z][a-z0-9_-]{0,63}$. */
  collection(name: string): ModuleCollection;
}

/** The key-value storage of `storage.redis: true` (quota `storage.limits.redisKeys`); keys are the module's own. */
export interface KeyValueStorage {
  get(key: string): Promise<string | null>;
  set(key: string, value: string, options?: { ttlMs?: number }): Promise<void>;
  delete(key: string): Promise<boolean>;
  /** The module's keys starting with `prefix` (all of them without one). */
  keys(prefix?: string): Promise<string[]>;
  increment(key: string): Promise<number>;
}

/** Storage handles; asking for one the manifest does not declare throws {@link UndeclaredStorageError}. */
export interface ModuleStorage {
  documents(): DocumentStorage;
  kv(): KeyValueStorage;
}

/** A provided capability's handle: its methods are called by consumers (arguments and results are structured-cloned). */
export type CapabilityHandle = Record<string, (...args: any[]) => unknown>;

/** A required capability as a consumer sees it: each call goes to the provider currently bound. */
export interface CapabilityClient {
  readonly id: string;
  /** The bound provider's module and version, or null while unresolved. */
  provider(): { moduleId: string; version: string; deprecated: boolean } | null;
  call<R = unknown>(method: string, ...args: unknown[]): Promise<R>;
}

/** Named capabilities (manifest `capabilities.provides` / `requires`). */
export interface ModuleCapabilities {
  /** Exposes the handle of a capability the manifest provides; call it in the load hook. */
  provide(id: string, handle: CapabilityHandle): void;
  /** A client of a capability the manifest requires. */
  require(id: string): CapabilityClient;
  /** Called when the provider bound to a requirement changes (rebinding). */
  onRebind(listener: (capabilityId: string, provider: { moduleId: string; version: string } | null) => void): void;
}

/** A Raft singleton lease held while the job runs. */
export interface SingletonLease {
  readonly name: string;
  readonly fencingToken: number;
  /** Aborted when the lease is lost: stop acting for the cluster. */
  readonly signal: AbortSignal;
}

/** The cluster as a module sees it. */
export interface ModuleCluster {
  /** This controller's member id. */
  readonly controllerId: string;
  /**
   * Runs `job` on one controller of the cluster at a time, under the Raft singleton lease
   * `module:<moduleId>:<name>` (renewed every third of `ttlMs` while it runs). Resolves false,
   * without running it, when another controller holds the lease; call again on your next tick.
   */
  runExclusive(name: string, ttlMs: number, job: (lease: SingletonLease) => Promise<void> | void): Promise<boolean>;
}

export interface ModuleLogger {
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

/** Everything a module is given. */
export interface ModuleContext {
  readonly moduleId: string;
  readonly version: string;
  readonly logger: ModuleLogger;
  readonly events: ModuleEventBus;
  readonly storage: ModuleStorage;
  readonly capabilities: ModuleCapabilities;
  readonly cluster: ModuleCluster;
}

/**
 * A controller module's lifecycle hooks, all optional (spec document 3, "States and transitions"):
 * install runs load, registerRoutes, start; upgrade runs stop and unload on the old version, then
 * load, upgrade and registerRoutes (and start) on the new one; reload (a `reloadable` module only)
 * runs reload then registerRoutes; uninstall runs stop then unload. A hook that throws leaves the
 * module FAILED without routes.
 */
export interface CloudModule {
  load?(context: ModuleContext): void | Promise<void>;
  /** Runs once after load and before start. */
  registerRoutes?(routes: RouteRegistrar, context: ModuleContext): void | Promise<void>;
  start?(context: ModuleContext): void | Promise<void>;
  stop?(context: ModuleContext): void | Promise<void>;
  unload?(context: ModuleContext): void | Promise<void>;
  /** After load of the new version, before its routes: `fromVersion` was running. */
  upgrade?(context: ModuleContext, fromVersion: string): void | Promise<void>;
  /** The reload fast path of a `reloadable` module: the same worker, routes registered again. */
  reload?(context: ModuleContext): void | Promise<void>;
}

/** Identity helper that types a module object. */
export function defineModule<M extends CloudModule>(module: M): M {
  return module;
}

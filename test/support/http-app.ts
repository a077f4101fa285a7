/**
 * Assembles the real controller HTTP app in-process for the HTTP tests: the embedded LevelDB document
 * store in a temporary directory, the real log, metrics, event bus, auth, audit and domain services,
 * served by @hono/node-server on an ephemeral port of 127.0.0.1. Domain route modules are mounted in
 * {@link domainRouteModules}; add new resources there so the authorization matrix and the fuzz test
 * cover them.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AddressInfo } from "node:net";
import { serve, type ServerType } from "@hono/node-server";
import type { Hono } from "hono";
import { AuditService } from "../../src/audit/audit-service.js";
import { AuthService } from "../../src/auth/auth-service.js";
import type { ScryptParams } from "../../src/auth/password.js";
import { ADMIN_ROLE, OPERATOR_ROLE, VIEWER_ROLE } from "../../src/auth/permissions.js";
import { parseControllerConfig } from "../../src/config/load.js";
import type { ControllerConfig } from "../../src/config/schema.js";
import { CrashService } from "../../src/domain/crashes/crash-service.js";
import { GroupService } from "../../src/domain/groups/group-service.js";
import { InstanceService } from "../../src/domain/instances/instance-service.js";
import { NodeTokenService } from "../../src/domain/node-tokens/node-token-service.js";
import { NodeService } from "../../src/domain/nodes/node-service.js";
import { OverviewService } from "../../src/domain/overview/overview-service.js";
import { createEventBus, type ControllerEventBus } from "../../src/events/bus.js";
import { createHttpApp } from "../../src/http/app.js";
import type { BodyLimitRoute } from "../../src/http/middleware/body-limit.js";
import { createReadinessProbe, type ReadinessComponents } from "../../src/http/readiness.js";
import type { RouteModule, RouteRegistry } from "../../src/http/route.js";
import { adminTokenRoutes } from "../../src/http/routes/admin-tokens.js";
import { crashRoutes } from "../../src/http/routes/crashes.js";
import { groupRoutes } from "../../src/http/routes/groups.js";
import { nodeRoutes } from "../../src/http/routes/nodes.js";
import { overviewRoutes } from "../../src/http/routes/overview.js";
import { serviceRoutes } from "../../src/http/routes/services.js";
import { templateRoutes } from "../../src/http/routes/templates.js";
import { groupSchedulingRoutes } from "../../src/http/routes/group-scheduling.js";
import { instanceControlRoutes, type ConsoleTicket } from "../../src/http/routes/instance-control.js";
import { pluginRoutes } from "../../src/http/routes/plugin.js";
import { Tickets } from "../../src/coordination/tickets.js";
import { ConsoleHub } from "../../src/gateway/console-hub.js";
import { MachineCredentials } from "../../src/plugin-api/credentials.js";
import { PlayerService } from "../../src/plugin-api/players.js";
import { AssertionError } from "../../src/shared/errors.js";
import type { AppEnv } from "../../src/http/types.js";
import { createLogService, type ControllerLogService } from "../../src/logs/logger.js";
import { createMetrics, type MetricsService } from "../../src/metrics/metrics.js";
import { systemClock, type Clock } from "../../src/shared/clock.js";
import { openBlobStore, openDocumentStore, openKvStore } from "../../src/store/open.js";
import type { BlobStore, DocumentStore, KvStore } from "../../src/store/ports.js";
import { TemplateService } from "../../src/templates/template-service.js";
import type { ClusterService } from "../../src/cluster/cluster-service.js";
import { startClusterService } from "../../src/cluster/start-cluster.js";
import { clusterRoutes } from "../../src/http/routes/cluster.js";
import { eventRoutes } from "../../src/http/routes/events.js";
import { startEventStream, type EventStream, type EventStreamOptions } from "../../src/events/start-event-stream.js";

/** Password of the bootstrap admin unless a test asks for a generated one. */
export const ADMIN_PASSWORD = "admin-password-1";
/** Cheaper scrypt cost for tests (hashes stay real scrypt hashes; only N is lower). */
export const TEST_SCRYPT: ScryptParams = { cost: 2 ** 12, blockSize: 8, parallelization: 1 };

/** Sections of controller.yml a test may override. */
export type ConfigOverrides = { [K in keyof ControllerConfig]?: Partial<ControllerConfig[K]> };

export interface TestAppOptions {
  /** Reuse a data directory (restart tests); a fresh temporary one by default. */
  dir?: string;
  config?: ConfigOverrides;
  /** Environment seen by the auth service (CLOUD_ADMIN_PASSWORD). Default: the admin password above. */
  env?: Record<string, string | undefined>;
  clock?: Clock;
  /** Overrides individual readiness checks. */
  readiness?: Partial<ReadinessComponents>;
  /** Extra route modules, mounted after the domain ones. */
  routeModules?: RouteModule[];
  /** Keep the real scrypt cost instead of {@link TEST_SCRYPT}. */
  realScryptCost?: boolean;
  /** Streamed routes with their own body limit, instead of the template uploads' defaults. */
  bodyLimitRoutes?: readonly BodyLimitRoute[];
  /** Where template uploads are spooled; the system temporary directory by default. */
  templateSpoolDirectory?: string;
  /** A key-value store to use (and leave open) instead of a fresh in-memory one: apps sharing one Redis. */
  kv?: KvStore;
  /** Bounds of the event stream (keep-alive, stall, client cap, ...). */
  eventStreamTuning?: EventStreamOptions["tuning"];
}

export interface RequestOptions {
  token?: string | null;
  body?: unknown;
  /** Sent verbatim instead of JSON-encoding `body`. */
  rawBody?: string;
  headers?: Record<string, string>;
}

export interface TestResponse {
  status: number;
  headers: Headers;
  text: string;
  /** Parsed JSON body, or undefined when the body is not JSON. */
  json: any;
}

export interface TestApp {
  baseUrl: string;
  dir: string;
  app: Hono<AppEnv>;
  registry: RouteRegistry;
  config: ControllerConfig;
  documents: DocumentStore;
  kv: KvStore;
  logs: ControllerLogService;
  /** Every formatted log line written so far. */
  logLines: string[];
  metrics: MetricsService;
  events: ControllerEventBus;
  auth: AuthService;
  audit: AuditService;
  groups: GroupService;
  instances: InstanceService;
  crashes: CrashService;
  nodes: NodeService;
  nodeTokens: NodeTokenService;
  blobs: BlobStore;
  templates: TemplateService;
  /** Workload tokens and node credentials (the plugin API's `auth: "workload"` routes). */
  credentials: MachineCredentials;
  /** A single-member cluster (Raft in `<dir>/raft`, transport on an ephemeral port). */
  cluster: ClusterService;
  /** The event journal, the SSE hub and their tickets. */
  eventStream: EventStream;
  request(method: string, path: string, options?: RequestOptions): Promise<TestResponse>;
  /** Signs in and returns the token. */
  login(username: string, password: string): Promise<string>;
  /** Creates `<role>-user` holding `role` (once) and returns a token for it. */
  tokenFor(role: string): Promise<string>;
  /** Stops the server and closes the store; the directory stays (see {@link close}). */
  stop(): Promise<void>;
  /** {@link stop}, then removes the directory unless it was given by the test. */
  close(): Promise<void>;
}

/**
 * The scheduler's operations in an app without a scheduler: the HTTP tests reach them only through
 * resources that do not exist here (404 first), so a call is a broken test.
 */
const schedulerNotRunning = {
  startExplicitly: (): never => {
    throw new AssertionError("the HTTP test app runs no scheduler");
  },
  resume: (): never => {
    throw new AssertionError("the HTTP test app runs no scheduler");
  },
  stopInstance: (): never => {
    throw new AssertionError("the HTTP test app runs no scheduler");
  },
  sendCommand: (): never => {
    throw new AssertionError("the HTTP test app runs no scheduler");
  },
  markReady: (): never => {
    throw new AssertionError("the HTTP test app runs no scheduler");
  },
};

/** The domain resources' route modules, built on the real services. */
function domainRouteModules(services: {
  groups: GroupService;
  instances: InstanceService;
  crashes: CrashService;
  nodes: NodeService;
  nodeTokens: NodeTokenService;
  overview: OverviewService;
  audit: AuditService;
  templates: TemplateService;
  templateSpoolDirectory?: string;
  kv: KvStore;
  metrics: MetricsService;
  credentials: MachineCredentials;
  players: PlayerService;
  cluster: ClusterService;
}): RouteModule[] {
  return [
    groupRoutes(services.groups, services.audit),
    groupSchedulingRoutes(services.groups, schedulerNotRunning, services.audit),
    serviceRoutes(services.instances),
    instanceControlRoutes({
      instances: services.instances,
      operations: schedulerNotRunning,
      console: new ConsoleHub(),
      tickets: new Tickets<ConsoleTicket>({ kv: services.kv }),
      audit: services.audit,
      metrics: services.metrics,
    }),
    pluginRoutes({ instances: services.instances, players: services.players, credentials: services.credentials, operations: schedulerNotRunning }),
    crashRoutes(services.crashes),
    nodeRoutes(services.nodes, services.audit),
    adminTokenRoutes(services.nodeTokens, services.audit),
    overviewRoutes(services.overview),
    clusterRoutes(services.cluster, services.audit),
    templateRoutes(services.templates, services.audit, { spoolDirectory: services.templateSpoolDirectory }),
  ];
}

/** Starts the app; call `close()` in `after`. */
export async function startTestApp(options: TestAppOptions = {}): Promise<TestApp> {
  const ownsDir = options.dir === undefined;
  const dir = options.dir ?? (await mkdtemp(join(tmpdir(), "cloud-http-")));
  const clock = options.clock ?? systemClock;
  const config = parseControllerConfig(
    {
      ...options.config,
      auth: { adminUsername: "admin", ...options.config?.auth },
      metrics: { enabled: true, ...options.config?.metrics },
    },
    { env: {} },
  );
  const logLines: string[] = [];
  const logs = createLogService({ level: "INFO", format: "JSON", clock }, { write: (chunk: string) => logLines.push(chunk) });
  // The composition root's adapter selection: development profile, embedded LevelDB under `dir`,
  // in-memory key-value store. TTL expiry is checked on read; the background sweep is off.
  const documents = await openDocumentStore({ profile: "development", dataDir: dir, clock, ttlSweepIntervalMs: 0 });
  const kv = options.kv ?? (await openKvStore({ clock }));
  const blobs = await openBlobStore({ profile: "development", dataDir: dir });
  const metrics = createMetrics({ enabled: config.metrics.enabled, processMetrics: false });
  const events = createEventBus({ logger: logs.logger("cloud.events"), clock });
  const auth = new AuthService({
    documents,
    config: config.auth,
    clock,
    logger: logs.logger("cloud.auth"),
    env: options.env ?? { CLOUD_ADMIN_PASSWORD: ADMIN_PASSWORD },
    passwordParams: options.realScryptCost ? undefined : TEST_SCRYPT,
  });
  await auth.start();
  const audit = new AuditService({ documents, clock });
  const cluster = await startClusterService({
    config: { ...config, raft: { ...config.raft, host: "127.0.0.1", port: 0, dataDir: join(dir, "raft") } },
    documents,
    audit,
    clock,
    logs,
    onLeft: () => undefined,
  });
  const instances = new InstanceService(documents, clock);
  const groups = new GroupService(documents, events, clock, instances);
  const crashes = new CrashService(documents, clock);
  const nodes = new NodeService(documents, events, clock, instances);
  const nodeTokens = new NodeTokenService(documents, clock);
  const overview = new OverviewService(groups, instances, nodes);
  const templates = new TemplateService({ documents, blobs, events, clock, spoolDirectory: options.templateSpoolDirectory });
  const credentials = await MachineCredentials.open(documents, clock, async (id) => (await instances.getDoc(id)) !== null);
  auth.verifyWorkloadToken = (token) => credentials.principalOf(token);
  const eventStream = await startEventStream({ kv, bus: events, metrics, clock, logger: logs.logger("cloud.events.stream"), tuning: options.eventStreamTuning });
  const readiness = createReadinessProbe({
    stateStore: () => documents.ping(),
    coordinationStore: () => kv.ping(),
    scheduler: () => true,
    platformModules: () => true,
    ...options.readiness,
  });

  const { app, registry } = createHttpApp({
    config,
    logs,
    metrics,
    events,
    documents,
    kv,
    auth,
    audit,
    readiness,
    version: { version: "0.1.0-test", gitCommit: "0123456789abcdef0123456789abcdef01234567", runtimeVersion: process.version },
    routeModules: [
      ...domainRouteModules({
        groups,
        instances,
        crashes,
        nodes,
        nodeTokens,
        overview,
        audit,
        templates,
        templateSpoolDirectory: options.templateSpoolDirectory,
        kv,
        metrics,
        credentials,
        players: new PlayerService(documents, events, clock, () => undefined),
        cluster,
      }),
      eventRoutes(eventStream),
      ...(options.routeModules ?? []),
    ],
    clock,
    bodyLimitRoutes: options.bodyLimitRoutes,
  });

  const server: ServerType = await new Promise((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s));
  });
  const { port } = server.address() as AddressInfo;
  const baseUrl = `http://127.0.0.1:${port}`;

  const request = async (method: string, path: string, opts: RequestOptions = {}): Promise<TestResponse> => {
    const headers: Record<string, string> = { ...opts.headers };
    if (opts.token) headers.authorization = `Bearer ${opts.token}`;
    let body: string | undefined = opts.rawBody;
    if (body === undefined && opts.body !== undefined) body = JSON.stringify(opts.body);
    if (body !== undefined) headers["content-type"] ??= "application/json";
    const res = await fetch(baseUrl + path, { method, headers, body });
    const text = await res.text();
    let json: unknown;
    try {
      json = text === "" ? undefined : JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: res.status, headers: res.headers, text, json };
  };

  const login = async (username: string, password: string): Promise<string> => {
    const res = await request("POST", "/api/v1/auth/login", { body: { username, password } });
    if (res.status !== 200) throw new Error(`login of ${username} failed: ${res.status} ${res.text}`);
    return res.json.token as string;
  };

  const tokens = new Map<string, string>();
  const tokenFor = async (role: string): Promise<string> => {
    const cached = tokens.get(role);
    if (cached) return cached;
    let token: string;
    if (role === ADMIN_ROLE) {
      token = await login(config.auth.adminUsername, options.env?.CLOUD_ADMIN_PASSWORD ?? ADMIN_PASSWORD);
    } else {
      const username = `${role.toLowerCase()}-user`;
      if (!(await auth.users.findByUsername(username))) {
        await auth.users.create({ username, password: `${username}-password`, roles: [role] });
      }
      token = await login(username, `${username}-password`);
    }
    tokens.set(role, token);
    return token;
  };

  let stopped = false;
  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    await eventStream.stop();
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      (server as { closeAllConnections?: () => void }).closeAllConnections?.();
    });
    await cluster.stop();
    await events.flush();
    await documents.close();
    if (!options.kv) await kv.close();
    await blobs.close();
  };

  return {
    baseUrl,
    dir,
    app,
    registry,
    config,
    documents,
    kv,
    logs,
    logLines,
    metrics,
    events,
    auth,
    audit,
    groups,
    instances,
    crashes,
    nodes,
    nodeTokens,
    blobs,
    templates,
    credentials,
    cluster,
    eventStream,
    request,
    login,
    tokenFor,
    stop,
    async close() {
      await stop();
      if (ownsDir) await rm(dir, { recursive: true, force: true });
    },
  };
}

/** The built-in roles the matrix iterates, plus anonymous (null). */
export const MATRIX_ROLES = [ADMIN_ROLE, OPERATOR_ROLE, VIEWER_ROLE, null] as const;

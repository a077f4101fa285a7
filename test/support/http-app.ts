/**
 * Starts the real controller in-process for the HTTP tests, through the composition root
 * (`startController`) with overrides: the embedded LevelDB document store in a temporary directory
 * (TTL sweep off), a cheaper scrypt cost, JSON logs kept in memory, a fixed version record, HTTP and
 * Raft on ephemeral ports of 127.0.0.1, and the background components (scheduler, daemon gateway
 * listener, audit pruner) off. This file builds no service: a route module mounted by the
 * controller is mounted here too, so the authorization matrix and the fuzz test cover it.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Hono } from "hono";
import type { AuditService } from "../../src/audit/audit-service.js";
import type { AuthService } from "../../src/auth/auth-service.js";
import type { ScryptParams } from "../../src/auth/password.js";
import { ADMIN_ROLE, OPERATOR_ROLE, VIEWER_ROLE } from "../../src/auth/permissions.js";
import type { ClusterService } from "../../src/cluster/cluster-service.js";
import { parseControllerConfig } from "../../src/config/load.js";
import type { ControllerConfig } from "../../src/config/schema.js";
import { startController, type RunningController } from "../../src/controller/controller.js";
import { mergeConfig, type ConfigOverrides } from "./config-overrides.js";
import { openControllerStores } from "../../src/controller/stores.js";
import type { CrashService } from "../../src/domain/crashes/crash-service.js";
import type { GroupService } from "../../src/domain/groups/group-service.js";
import type { InstanceService } from "../../src/domain/instances/instance-service.js";
import type { NodeTokenService } from "../../src/domain/node-tokens/node-token-service.js";
import type { NodeService } from "../../src/domain/nodes/node-service.js";
import type { ControllerEventBus } from "../../src/events/bus.js";
import type { BodyLimitRoute } from "../../src/http/middleware/body-limit.js";
import type { ReadinessComponents } from "../../src/http/readiness.js";
import type { RouteModule, RouteRegistry } from "../../src/http/route.js";
import type { AppEnv } from "../../src/http/types.js";
import type { ControllerLogService } from "../../src/logs/logger.js";
import type { MetricsService } from "../../src/metrics/metrics.js";
import type { MachineCredentials } from "../../src/plugin-api/credentials.js";
import type { PlayerService } from "../../src/plugin-api/players.js";
import type { TransferService } from "../../src/plugin-api/transfers.js";
import type { DrainTransfers } from "../../src/plugin-api/drain-transfers.js";
import type { Clock } from "../../src/shared/clock.js";
import type { BlobStore, DocumentStore, KvStore } from "../../src/store/ports.js";
import type { TemplateService } from "../../src/templates/template-service.js";
import type { EventStream, EventStreamOptions } from "../../src/controller/event-stream.js";
import type { MetricsHistory } from "../../src/metrics/metrics-history.js";
import type { BackupService } from "../../src/backup/backup-service.js";
import type { LogsAndSharing, LogsAndSharingTuning } from "../../src/controller/logs-and-sharing.js";
import type { Capabilities } from "../../src/controller/capabilities.js";
import type { ModulePlatform, ModulePlatformTuning } from "../../src/modules/module-platform.js";

/** Password of the bootstrap admin unless a test asks for a generated one. */
export const ADMIN_PASSWORD = "admin-password-1";
/** Cheaper scrypt cost for tests (hashes stay real scrypt hashes; only N is lower). */
export const TEST_SCRYPT: ScryptParams = { cost: 2 ** 12, blockSize: 8, parallelization: 1 };

export interface TestAppOptions {
  /** Reuse a data directory (restart tests); a fresh temporary one by default. */
  dir?: string;
  config?: ConfigOverrides;
  /** The controller's environment (CLOUD_ADMIN_PASSWORD). Default: the admin password above. */
  env?: Record<string, string | undefined>;
  clock?: Clock;
  /** Overrides individual readiness checks. */
  readiness?: Partial<ReadinessComponents>;
  /** Extra route modules, mounted after the controller's own. */
  routeModules?: RouteModule[];
  /** Keep the real scrypt cost instead of {@link TEST_SCRYPT}. */
  realScryptCost?: boolean;
  /** Streamed routes with their own body limit, instead of the template uploads' defaults. */
  bodyLimitRoutes?: readonly BodyLimitRoute[];
  /** Where template uploads are spooled; the system temporary directory by default. */
  templateSpoolDirectory?: string;
  /** The built dashboard to serve under `/ui/`; the repository's `dist/dashboard` by default. */
  dashboardDir?: string;
  /** A key-value store to use (and leave open) instead of a fresh in-memory one: apps sharing one Redis. */
  kv?: KvStore;
  /** Bounds of the event stream (keep-alive, stall, client cap, ...). */
  eventStreamTuning?: EventStreamOptions["tuning"];
  /** Bounds of the daemon log mirror and log streams, and the paste upload. */
  logsAndSharingTuning?: LogsAndSharingTuning;
  /** Run the scheduler (scopes acquired and adopted at start; no daemon connects). Off by default. */
  scheduler?: boolean;
  /** Intervals and timeouts of the platform modules. */
  moduleTuning?: Partial<ModulePlatformTuning>;
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
  /** The player registry (in the key-value store). */
  players: PlayerService;
  /** Player transfers. */
  transfers: TransferService;
  /** Moves the players of draining instances (plugin-api/drain-transfers.ts). */
  drainTransfers: DrainTransfers;
  /** A single-member cluster (Raft in `<dir>/raft`, transport on an ephemeral port). */
  cluster: ClusterService;
  /** The event journal, the SSE hub and their tickets. */
  eventStream: EventStream;
  /** The sampled metrics history behind `GET /api/v1/metrics/history`. */
  metricsHistory: MetricsHistory;
  /** Backups under `<dir>/backups` and restores. */
  backups: BackupService;
  /** The daemon log mirror's buffers, the log streams, diagnostics and sharing. */
  logsAndSharing: LogsAndSharing;
  /** Global maintenance and the other operator capabilities (src/controller/capabilities.ts). */
  capabilities: Capabilities;
  /** The scheduler host (running only with `scheduler: true`). */
  scheduler: RunningController["scheduler"];
  /** Platform modules. */
  modules: ModulePlatform;
  request(method: string, path: string, options?: RequestOptions): Promise<TestResponse>;
  /** Signs in and returns the token. */
  login(username: string, password: string): Promise<string>;
  /** Creates `<role>-user` holding `role` (once) and returns a token for it. */
  tokenFor(role: string): Promise<string>;
  /** Stops the controller (server, cluster member, stores); the directory stays (see {@link close}). */
  stop(): Promise<void>;
  /** {@link stop}, then removes the directory unless it was given by the test. */
  close(): Promise<void>;
}

/** The version record the HTTP tests see. */
const TEST_VERSION = { version: "0.1.0-test", gitCommit: "0123456789abcdef0123456789abcdef01234567", runtimeVersion: process.version };

/** Starts the app; call `close()` in `after`. */
export async function startTestApp(options: TestAppOptions = {}): Promise<TestApp> {
  const ownsDir = options.dir === undefined;
  const dir = options.dir ?? (await mkdtemp(join(tmpdir(), "cloud-http-")));
  const overrides = options.config ?? {};
  const logLines: string[] = [];
  let controller: RunningController;
  try {
    const config = parseControllerConfig(
      mergeConfig(
        {
          http: { host: "127.0.0.1", port: 0 },
          grpc: { port: 0 },
          raft: { host: "127.0.0.1", port: 0, dataDir: join(dir, "raft") },
          data: { dir },
          logging: { level: "INFO", format: "JSON" },
          auth: { adminUsername: "admin" },
          metrics: { enabled: true },
        },
        overrides,
      ),
      { env: {} },
    );
    controller = await startController(config, {
      clock: options.clock,
      env: options.env ?? { CLOUD_ADMIN_PASSWORD: ADMIN_PASSWORD },
      logOut: { write: (chunk: string) => void logLines.push(chunk) },
      // Expiry is checked on read; the background sweep is off.
      openStores: (c, logs, clock) => openControllerStores(c, logs, clock, { ttlSweepIntervalMs: 0, kv: options.kv }),
      components: { scheduler: options.scheduler ?? false, daemonGateway: false, auditPruner: false },
      passwordParams: options.realScryptCost ? undefined : TEST_SCRYPT,
      readiness: options.readiness,
      eventStreamTuning: options.eventStreamTuning,
      logsAndSharingTuning: options.logsAndSharingTuning,
      moduleTuning: options.moduleTuning,
      extraRouteModules: options.routeModules,
      bodyLimitRoutes: options.bodyLimitRoutes,
      templateSpoolDirectory: options.templateSpoolDirectory,
      dashboardDir: options.dashboardDir,
      version: TEST_VERSION,
      processMetrics: false,
    });
  } catch (err) {
    if (ownsDir) await rm(dir, { recursive: true, force: true });
    throw err;
  }
  const { config, services } = controller;
  const baseUrl = controller.httpUrl;

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
      if (!(await services.auth.users.findByUsername(username))) {
        await services.auth.users.create({ username, password: `${username}-password`, roles: [role] });
      }
      token = await login(username, `${username}-password`);
    }
    tokens.set(role, token);
    return token;
  };

  const stop = (): Promise<void> => controller.stop();

  return {
    baseUrl,
    dir,
    app: controller.app,
    registry: controller.registry,
    config,
    documents: services.documents,
    kv: services.kv,
    logs: controller.logs,
    logLines,
    metrics: controller.metrics,
    events: controller.events,
    auth: services.auth,
    audit: services.audit,
    groups: services.groups,
    instances: services.instances,
    crashes: services.crashes,
    nodes: services.nodes,
    nodeTokens: services.nodeTokens,
    blobs: services.blobs,
    templates: services.templates,
    credentials: services.credentials,
    players: services.players,
    transfers: services.transfers,
    drainTransfers: services.drainTransfers,
    cluster: services.cluster,
    eventStream: services.eventStream,
    metricsHistory: services.metricsHistory,
    backups: services.backups,
    logsAndSharing: services.logsAndSharing,
    capabilities: services.capabilities,
    scheduler: controller.scheduler,
    modules: services.modules,
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

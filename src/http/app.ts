/**
 * The hono application: the middleware chain in the order of spec document 1 ("Authentication"),
 * the central error handler, and every route module. `createHttpApp` is pure wiring; serving it on a
 * port is the composition root's job (`@hono/node-server`).
 *
 * Chain, outermost first: HTTP metrics (every request, whatever answers) -> security headers (CSP,
 * nosniff, no framing; on every answer) -> client address -> unread
 * body drain -> CORS -> subnet guard (only `/api/*`; `/metrics` skips it) -> request id + correlation
 * -> per-IP rate limit -> JWT authentication -> per-user rate limit -> restore gate (writes answer 503
 * while a restore holds the cluster) -> UTF-8 URL check -> body size
 * limit -> route (authorization, then body parsing and validation). docs/decisions/http-auth.md
 * explains each step. The dashboard's files are served under `/ui/` (docs/decisions/dashboard.md).
 */
import { Hono } from "hono";
import type { AuditService } from "../audit/audit-service.js";
import type { AuthService } from "../auth/auth-service.js";
import { LoginThrottle } from "../auth/login-throttle.js";
import type { ControllerConfig } from "../config/schema.js";
import type { EventBus } from "../events/types.js";
import type { LogService } from "../logs/types.js";
import { systemClock, type Clock } from "../shared/clock.js";
import type { DocumentStore, KvStore } from "../store/ports.js";
import { authenticate } from "./middleware/authenticate.js";
import { bodyLimit, type BodyLimitRoute } from "./middleware/body-limit.js";
import { clientAddress } from "./middleware/client-address.js";
import { crossOrigin } from "./middleware/cross-origin.js";
import { drainBody } from "./middleware/drain-body.js";
import { handleError, handleNotFound } from "./middleware/error-handler.js";
import { httpMetrics, type HttpMetricsRecorder } from "./middleware/http-metrics.js";
import { traceRequests } from "./middleware/trace-requests.js";
import type { Tracing } from "../shared/tracing.js";
import { perIpRateLimit, perUserRateLimit } from "./middleware/rate-limit.js";
import { requestId } from "./middleware/request-context.js";
import { restoreGate, type RestoreInProgress } from "./middleware/restore-gate.js";
import { securityHeaders } from "./middleware/security-headers.js";
import { DASHBOARD_PATH, dashboardRoutes } from "./routes/dashboard.js";
import { NO_DASHBOARD, type DashboardAssets } from "./dashboard-assets.js";
import { subnetGuard } from "./middleware/subnet-guard.js";
import { utf8Url } from "./middleware/utf8-url.js";
import { RouteRegistry, type RouteModule } from "./route.js";
import { registerSchemaFormats } from "./schema-formats.js";
import { auditRoutes } from "./routes/audit.js";
import { authRoutes } from "./routes/auth.js";
import { metricsRoutes, type MetricsExposition } from "./routes/metrics.js";
import { openApiRoutes } from "./routes/openapi.js";
import { roleRoutes } from "./routes/roles.js";
import { systemRoutes, type ReadinessProbe, type VersionInfo } from "./routes/system.js";
import { TEMPLATE_BODY_LIMIT_ROUTES } from "./routes/templates.js";
import { BACKUP_BODY_LIMIT_ROUTES } from "./routes/backups.js";
import { MODULE_BODY_LIMIT_ROUTES } from "./routes/modules.js";
import { userRoutes } from "./routes/users.js";
import { minecraftLinkRoutes } from "./routes/minecraft-links.js";
import type { AppEnv } from "./types.js";

/** The metrics service as the HTTP layer sees it: records requests and renders `/metrics`. */
export interface HttpMetricsService extends HttpMetricsRecorder, MetricsExposition {}

/** Request bodies above this many bytes are refused with 413 PAYLOAD_TOO_LARGE. */
export const BODY_LIMIT_BYTES_DEFAULT = 1024 * 1024;

/** Everything the HTTP layer needs; built by the composition root. */
export interface HttpDeps {
  /** controller.yml `http`: the CORS origins and the subnets allowed to reach `/api`. */
  http: ControllerConfig["http"];
  /** controller.yml `rateLimit`: the per-IP and per-user limits. */
  rateLimit: ControllerConfig["rateLimit"];
  logs: LogService;
  metrics: HttpMetricsService;
  events: EventBus;
  /** Only handed to route modules and readiness probes; routes themselves call services. */
  documents: DocumentStore;
  kv: KvStore;
  auth: AuthService;
  audit: AuditService;
  readiness: ReadinessProbe;
  version: VersionInfo;
  /** Domain route modules, mounted after the core ones. */
  routeModules: readonly RouteModule[];
  /** Time source of the rate limiters; the system clock by default. */
  clock?: Clock;
  bodyLimitBytes?: number;
  /** Routes whose bodies stream with their own limit; the template uploads and imports, the backup upload and the module uploads by default. */
  bodyLimitRoutes?: readonly BodyLimitRoute[];
  /** A server span per request (`telemetry.*`); none when absent or disabled. */
  tracing?: Tracing;
  /** `telemetry.traceUiTemplate`: traced responses carry `X-Trace-Url` built from it. */
  traceUiTemplate?: string;
  /** The restore holding the cluster in maintenance, if any: writes answer 503 meanwhile. */
  restoreInProgress?: () => RestoreInProgress | null;
  /** The built dashboard served under `/ui/`; a notice that it is not built when absent. */
  dashboard?: DashboardAssets;
}

/** Builds the application and the registry of every route mounted on it. */
export function createHttpApp(deps: HttpDeps): { app: Hono<AppEnv>; registry: RouteRegistry } {
  registerSchemaFormats();
  const app = new Hono<AppEnv>();
  const registry = new RouteRegistry();
  const clock = deps.clock ?? systemClock;
  const logger = deps.logs.logger("cloud.http");
  const { http, rateLimit } = deps;
  const bodyLimitBytes = deps.bodyLimitBytes ?? BODY_LIMIT_BYTES_DEFAULT;

  app.onError(handleError({ logger }));
  app.notFound(handleNotFound());

  app.use("*", httpMetrics({ metrics: deps.metrics }));
  app.use("*", securityHeaders({ dashboardPrefix: DASHBOARD_PATH }));
  app.use("*", clientAddress());
  app.use("*", drainBody({ maxBytes: bodyLimitBytes }));
  app.use("*", crossOrigin({ origins: http.corsOrigins }));
  app.use("/api/*", subnetGuard({ allowedCidrs: http.allowedCidrs }));
  app.use("*", requestId({ logs: deps.logs }));
  if (deps.tracing?.enabled) app.use("*", traceRequests({ tracing: deps.tracing, traceUiTemplate: deps.traceUiTemplate ?? "" }));
  app.use("*", perIpRateLimit({ perMinute: rateLimit.perIpPerMinute, clock }));
  app.use("*", authenticate({ auth: deps.auth }));
  app.use("*", perUserRateLimit({ perMinute: rateLimit.perUserPerMinute, clock }));
  if (deps.restoreInProgress) app.use("*", restoreGate({ current: deps.restoreInProgress }));
  app.use("*", utf8Url());
  app.use(
    "*",
    bodyLimit({
      maxBytes: bodyLimitBytes,
      routes: deps.bodyLimitRoutes ?? [...TEMPLATE_BODY_LIMIT_ROUTES, ...BACKUP_BODY_LIMIT_ROUTES, ...MODULE_BODY_LIMIT_ROUTES],
    }),
  );

  const core: RouteModule[] = [
    metricsRoutes({ metrics: deps.metrics }),
    authRoutes({ auth: deps.auth, throttle: new LoginThrottle({ kv: deps.kv, clock }) }),
    userRoutes({ auth: deps.auth, audit: deps.audit }),
    minecraftLinkRoutes({ auth: deps.auth, audit: deps.audit }),
    roleRoutes({ auth: deps.auth, audit: deps.audit }),
    auditRoutes({ audit: deps.audit }),
    systemRoutes({ readiness: deps.readiness, version: deps.version, logger }),
  ];
  for (const mount of [...core, ...deps.routeModules]) mount(app, registry);
  dashboardRoutes(deps.dashboard ?? NO_DASHBOARD)(app);
  // Last, so the document lists every route, including the domain modules'.
  openApiRoutes({ version: deps.version.version })(app, registry);
  return { app, registry };
}

/** Sign-in and the caller's own identity: `POST /api/v1/auth/login`, `GET /api/v1/auth/me`, `GET /api/v1/permissions`. */
import { Hono } from "hono";
import { Type } from "@sinclair/typebox";
import type { AuthService } from "../../auth/auth-service.js";
import type { LoginThrottle } from "../../auth/login-throttle.js";
import { PERMISSION_CATALOG } from "../../auth/permissions.js";
import { unauthorized } from "../../shared/errors.js";
import { RateLimitedError } from "../middleware/rate-limit.js";
import { addRoute, type RouteModule } from "../route.js";
import type { AppEnv } from "../types.js";

/** Longest username or password accepted by login before any hashing happens. */
const CREDENTIAL_LENGTH_MAX = 1024;

/** Both fields optional in the schema: missing credentials are a 401, like wrong ones. */
export const LoginRequestSchema = Type.Object({
  username: Type.Optional(Type.String({ maxLength: CREDENTIAL_LENGTH_MAX })),
  password: Type.Optional(Type.String({ maxLength: CREDENTIAL_LENGTH_MAX })),
});

export const LoginResponseSchema = Type.Object({
  token: Type.String({ description: "JWT to send as Authorization: Bearer <token>" }),
  expiresAt: Type.String({ format: "date-time" }),
});

export const MeSchema = Type.Object({
  username: Type.String(),
  kind: Type.String(),
  roles: Type.Array(Type.String()),
  permissions: Type.Array(Type.String()),
});

export const PermissionSchema = Type.Object({ name: Type.String(), description: Type.String() });

export const authRoutes =
  (deps: { auth: AuthService; throttle: LoginThrottle }): RouteModule =>
  (app, registry) => {
    const sub = new Hono<AppEnv>();
    addRoute(
      sub,
      registry,
      {
        method: "post",
        path: "/api/v1/auth/login",
        summary:
          "Sign in with username and password; returns a JWT (not audited). Repeated failures per account and per address back off: 429 with Retry-After",
        tag: "auth",
        auth: "public",
        body: LoginRequestSchema,
        response: LoginResponseSchema,
      },
      async ({ body, c }) => {
        if (!body.username?.trim() || !body.password) throw unauthorized("Invalid username or password");
        const address = c.get("clientIp");
        const admission = await deps.throttle.admit(body.username, address);
        if (!admission.admitted) throw new RateLimitedError(Math.max(1, Math.ceil(admission.retryAfterMs / 1000)));
        const result = await deps.auth.login(body.username, body.password, address);
        await deps.throttle.succeeded(body.username, address);
        return result;
      },
    );
    addRoute(
      sub,
      registry,
      { method: "get", path: "/api/v1/auth/me", summary: "The signed-in principal", tag: "auth", response: MeSchema },
      ({ principal }) => ({
        username: principal!.username,
        kind: principal!.kind,
        roles: [...principal!.roles],
        permissions: [...principal!.permissions].sort(),
      }),
    );
    addRoute(
      sub,
      registry,
      {
        method: "get",
        path: "/api/v1/permissions",
        summary: "The permission catalog",
        tag: "auth",
        response: Type.Array(PermissionSchema),
      },
      () => PERMISSION_CATALOG.map((perm) => ({ name: perm.name, description: perm.description })),
    );
    app.route("/", sub);
  };

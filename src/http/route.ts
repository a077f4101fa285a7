/**
 * Route definitions: every route declares its request and response schemas (typebox) and the
 * permission it needs. `mountRoutes` registers them on a hono app with validation and authorization,
 * and the same definitions feed the OpenAPI document (`openapi.ts`).
 */
import type { Hono } from "hono";
import type { Static, TSchema } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import { badRequest, forbidden, unauthorized, validationError } from "../shared/errors.js";
import type { Principal } from "../auth/principal.js";
import { firstSchemaError } from "../domain/shared/validate.js";
import { parseJsonBody } from "./json-body.js";
import type { AppContext, AppEnv } from "./types.js";

export type HttpMethod = "get" | "post" | "put" | "patch" | "delete";

/** `public`: no credentials; `user`: a signed-in user (JWT); `workload`: an instance token. */
export type RouteAuth = "public" | "user" | "workload";

export interface RouteDef<P extends TSchema = TSchema, Q extends TSchema = TSchema, B extends TSchema = TSchema> {
  method: HttpMethod;
  /** Full path in hono syntax, e.g. `/api/v1/groups/:name`. */
  path: string;
  summary: string;
  tag: string;
  auth?: RouteAuth;
  /** Permission required (user routes); undefined means any signed-in user. */
  permission?: string;
  params?: P;
  query?: Q;
  body?: B;
  /** Response schema of the success status; omitted for non-JSON responses (streams, files). */
  response?: TSchema;
  successStatus?: number;
  /** Status of a body that breaks its schema: 422 VALIDATION_ERROR by default; 400 BAD_REQUEST where the spec says 400. */
  invalidBodyStatus?: 400 | 422;
}

export interface RouteInput<P extends TSchema, Q extends TSchema, B extends TSchema> {
  params: Static<P>;
  query: Static<Q>;
  body: Static<B>;
  principal: Principal | null;
  c: AppContext;
}

export type RouteHandler<P extends TSchema, Q extends TSchema, B extends TSchema> = (
  input: RouteInput<P, Q, B>,
) => Promise<Response | unknown> | Response | unknown;

export interface RegisteredRoute {
  def: RouteDef;
}

/**
 * A resource's routes: registers them (usually on a sub-app mounted with `app.route`) through
 * {@link addRoute} so they are validated, authorized and listed in the registry.
 */
export type RouteModule = (app: Hono<AppEnv>, registry: RouteRegistry) => void;

/** Collects route definitions for authorization tests and the OpenAPI document. */
export class RouteRegistry {
  readonly routes: RegisteredRoute[] = [];
}

/** Describes the first schema violation as `<field>: <reason>` so the message names the field. */
export function describeSchemaError(schema: TSchema, value: unknown, where: string): string | null {
  const first = firstSchemaError(schema, value);
  if (!first) return null;
  const field = first.path.replace(/^\//, "").replace(/\//g, ".") || where;
  return `${field}: ${first.message}`;
}

function checkInput<T extends TSchema>(schema: T | undefined, raw: unknown, where: string, convert: boolean, status: 400 | 422 = 422): Static<T> {
  if (!schema) return raw as Static<T>;
  let value = raw;
  if (convert) value = Value.Convert(schema, Value.Clone(raw));
  value = Value.Default(schema, value);
  const problem = describeSchemaError(schema, value, where);
  if (problem) throw status === 400 ? badRequest(problem) : validationError(problem);
  return value as Static<T>;
}

/** The body as JSON: strict UTF-8, bounded nesting, well-formed strings (`json-body.ts`), else 400. */
async function readJsonBody(c: AppContext): Promise<unknown> {
  return parseJsonBody(new Uint8Array(await c.req.arrayBuffer()));
}

export function authorize(def: RouteDef, principal: Principal | null): void {
  const auth = def.auth ?? "user";
  if (auth === "public") return;
  if (!principal) throw unauthorized();
  if (auth === "workload" && principal.kind !== "workload") throw unauthorized("Workload token required");
  if (auth === "user" && principal.kind !== "user") throw unauthorized("User token required");
  if (def.permission && !principal.permissions.has(def.permission)) {
    throw forbidden(`Missing permission: ${def.permission}`);
  }
}

/** Registers one route on `app` and records it in `registry`. */
export function addRoute<P extends TSchema, Q extends TSchema, B extends TSchema>(
  app: Hono<AppEnv>,
  registry: RouteRegistry,
  def: RouteDef<P, Q, B>,
  handler: RouteHandler<P, Q, B>,
): void {
  registry.routes.push({ def: def as unknown as RouteDef });
  app.on(def.method.toUpperCase(), def.path, async (c) => {
    const principal = c.get("principal") ?? null;
    const failure = c.get("authFailure");
    if (!principal && failure && (def.auth ?? "user") !== "public") throw unauthorized(failure);
    authorize(def as unknown as RouteDef, principal);
    // The body is read (syntax, nesting, UTF-8: 400) before any schema is applied, the path's included.
    const raw = def.body ? await readJsonBody(c) : undefined;
    const params = checkInput(def.params, c.req.param(), "path", true);
    const query = checkInput(def.query, c.req.query(), "query", true);
    const body = def.body ? checkInput(def.body, raw, "body", false, def.invalidBodyStatus) : (undefined as Static<B>);
    const result = await handler({ params, query, body, principal, c });
    if (result instanceof Response) return result;
    return c.json(result as object, (def.successStatus ?? 200) as 200);
  });
}

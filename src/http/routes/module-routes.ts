/**
 * The routes platform modules mount (spec document 3, "Module-mounted routes"): one wildcard per
 * method (GET, POST, PUT, DELETE, PATCH) at `/api/v1/modules/{moduleId}/{rest}`, behind the whole
 * middleware chain (a module never authenticates on its own). GET needs `modules.view`, the other
 * methods `modules.invoke`. Dispatcher order: the reserved id `platform` is 404 NOT_FOUND without
 * asking any module; no module route matching is 404 NOT_FOUND `Module route not found`; a module
 * that is not ACTIVE (its required capabilities are missing, it is reloading) answers 503
 * MODULE_UNAVAILABLE; otherwise the module's worker answers. The module sees neither the caller's
 * credentials (`Authorization` and `Cookie` are not passed on) nor roles.
 */
import type { Hono } from "hono";
import { Type } from "@sinclair/typebox";
import { RESERVED_MODULE_ID } from "../../modules/manifest/manifest-types.js";
import type { ModuleManager } from "../../modules/host/module-manager.js";
import { WorkerCallFailed } from "../../modules/host/module-worker.js";
import { pathSegmentsOf } from "../../sdk/module/route-template.js";
import { ApiError, badRequest, notFound } from "../../shared/errors.js";
import { addRoute, type HttpMethod, type RouteRegistry } from "../route.js";
import type { AppContext, AppEnv } from "../types.js";

const tag = "Module routes";
const METHODS: readonly HttpMethod[] = ["get", "post", "put", "delete", "patch"];
/** Headers a module never sees: the caller's credentials. */
const WITHHELD_HEADERS = new Set(["authorization", "cookie"]);
/** Headers a module may not set on its response (the server frames the response). */
const FRAMING_HEADERS = new Set(["content-length", "transfer-encoding", "connection", "keep-alive", "upgrade"]);

/** Mounts the wildcard of every method; after the management routes, so `platform/...` is theirs first. */
export function moduleMountedRoutes(manager: ModuleManager): (app: Hono<AppEnv>, registry: RouteRegistry) => void {
  return (app, registry) => {
    for (const method of METHODS) {
      addRoute(
        app,
        registry,
        {
          method,
          path: "/api/v1/modules/:moduleId/:rest{.+}",
          summary: `A route a platform module registered (${method.toUpperCase()}); the module's own answer, or 404 Module route not found`,
          tag,
          permission: method === "get" ? "modules.view" : "modules.invoke",
          params: Type.Object({ moduleId: Type.String(), rest: Type.String() }),
        },
        ({ c }) => dispatch(manager, method.toUpperCase(), c),
      );
    }
  };
}

async function dispatch(manager: ModuleManager, method: string, c: AppContext): Promise<Response> {
  const url = new URL(c.req.url);
  const [, , , , rawId, ...rest] = url.pathname.split("/");
  const [moduleId] = pathSegmentsOf(rawId ?? "") ?? [];
  const segments = pathSegmentsOf(rest.join("/"));
  if (moduleId === undefined || !segments) throw badRequest("The path holds a malformed percent-escape");
  if (moduleId === RESERVED_MODULE_ID) throw notFound("Not found");
  const match = manager.route(moduleId, method, segments);
  if (!match) throw notFound("Module route not found");
  if (match.runtime.state !== "ACTIVE") throw new ApiError(503, "MODULE_UNAVAILABLE", `Module ${moduleId} is ${match.runtime.state}`);
  const headers: Record<string, string> = {};
  c.req.raw.headers.forEach((value, name) => {
    if (!WITHHELD_HEADERS.has(name.toLowerCase())) headers[name.toLowerCase()] = value;
  });
  const query: Record<string, string> = {};
  for (const [key, value] of url.searchParams) if (!(key in query)) query[key] = value;
  const body = method === "GET" ? new Uint8Array(0) : new Uint8Array(await c.req.arrayBuffer());
  let answer;
  try {
    answer = await match.runtime.call(match.index, { method, path: url.pathname, pathParams: match.params, query, headers, body });
  } catch (error) {
    if (error instanceof WorkerCallFailed && error.kind === "timeout") throw new ApiError(504, "MODULE_TIMEOUT", error.message);
    if (error instanceof WorkerCallFailed) throw new ApiError(503, "MODULE_UNAVAILABLE", error.message);
    throw error;
  }
  const responseHeaders = new Headers();
  for (const [name, value] of Object.entries(answer.headers)) {
    if (FRAMING_HEADERS.has(name)) continue;
    try {
      responseHeaders.set(name, value);
    } catch {
      // A header the module could not have meant (an invalid name or value) is left out.
    }
  }
  const empty = answer.status === 204 || answer.status === 304;
  return new Response(empty ? null : answer.body, { status: answer.status, headers: responseHeaders });
}

/**
 * One call of a module route, pure: find the first route matching (rule 4), parse a typed body (rule
 * 6: a body that does not parse is answered 400 `{"error":"invalid json body","details":...}` and the
 * handler is not called), run the handler, and map what it throws (spec document 3, "Errors").
 */
import { errorKindOf } from "./errors.js";
import { applyBodyType, messageOf, moduleRequest, ModuleResponseRecorder, type RequestData, type ResponseData } from "./request.js";
import type { RegisteredModuleRoute } from "./route-registrar.js";
import { matchRouteTemplate, type RouteTemplate } from "./route-template.js";
import type { Handler, TypedHandler } from "./types.js";

/** The first route of `routes` for `method` whose template matches `segments`, with its parameters. */
export function findModuleRoute(
  routes: readonly { method: string; template: RouteTemplate }[],
  method: string,
  segments: readonly string[],
): { index: number; params: Record<string, string> } | null {
  for (let index = 0; index < routes.length; index++) {
    const route = routes[index];
    if (route.method !== method) continue;
    const params = matchRouteTemplate(route.template, segments);
    if (params) return { index, params };
  }
  return null;
}

const envelope = (status: number, code: string, message: string): ResponseData => ({
  status,
  headers: { "content-type": "application/json" },
  body: JSON.stringify({ error: { code, message, status } }),
  sent: true,
});

/** The answer to a throw of a handler; `log` gets the real message of an unexpected one. */
export function responseForError(error: unknown, log: (message: string) => void): ResponseData {
  const kind = errorKindOf(error);
  if (kind === "invalid-argument") return envelope(422, "VALIDATION_ERROR", messageOf(error));
  if (kind === "not-found") return envelope(404, "NOT_FOUND", messageOf(error));
  log(`Module handler failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  return envelope(500, "INTERNAL_ERROR", "An internal error occurred");
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** Runs `route` for the request `data`; never throws. */
export async function runModuleRoute(route: RegisteredModuleRoute, data: RequestData, log: (message: string) => void): Promise<ResponseData> {
  const request = moduleRequest(data);
  const response = new ModuleResponseRecorder();
  try {
    if (route.bodyType) {
      let body: unknown;
      try {
        body = applyBodyType(route.bodyType, JSON.parse(utf8.decode(data.body ?? new Uint8Array(0))));
      } catch (error) {
        const details = messageOf(error);
        return {
          status: 400,
          headers: { "content-type": "application/json" },
          body: JSON.stringify(details.trim() === "" ? { error: "invalid json body" } : { error: "invalid json body", details }),
          sent: true,
        };
      }
      await (route.handler as TypedHandler<unknown>)(request, body, response);
    } else {
      await (route.handler as Handler)(request, response);
    }
  } catch (error) {
    return responseForError(error, log);
  }
  return response.result();
}

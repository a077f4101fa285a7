/**
 * Generates the OpenAPI 3.1 document from the {@link RouteRegistry}. typebox schemas are JSON Schema
 * already (OpenAPI 3.1 uses JSON Schema 2020-12), so they are embedded as they are, minus typebox's
 * symbol keys, which JSON serialization drops anyway.
 */
import type { TSchema } from "@sinclair/typebox";
import { ErrorEnvelopeSchema } from "./envelope.js";
import type { RegisteredRoute, RouteRegistry } from "./route.js";

type JsonObject = Record<string, unknown>;

const ERROR_REF = { $ref: "#/components/schemas/ErrorEnvelope" };
const ERROR_DESCRIPTIONS: Readonly<Record<string, string>> = {
  "400": "Malformed request",
  "401": "Missing or invalid credentials",
  "403": "The caller lacks the permission",
  "404": "Unknown resource",
  "413": "Request body too large",
  "422": "Invalid input; the message names the field",
  "429": "Rate limited; see Retry-After",
  "500": "Internal error (details are logged only)",
};

/** Plain JSON copy of a typebox schema (drops symbol keys and `$id`). */
function plain(schema: TSchema): JsonObject {
  const copy = JSON.parse(JSON.stringify(schema)) as JsonObject;
  delete copy.$id;
  return copy;
}

/** `/api/v1/groups/:name` (hono) -> `/api/v1/groups/{name}` (OpenAPI); regex constraints dropped. */
export function toOpenApiPath(path: string): string {
  return path.replace(/:([A-Za-z0-9_]+)(\{[^}]*\})?\??/g, "{$1}");
}

function pathParamNames(path: string): string[] {
  return [...path.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => m[1]);
}

function parameters(route: RegisteredRoute): JsonObject[] {
  const { def } = route;
  const out: JsonObject[] = [];
  const paramProps = (def.params ? plain(def.params).properties : undefined) as Record<string, JsonObject> | undefined;
  for (const name of pathParamNames(def.path)) {
    out.push({ name, in: "path", required: true, schema: paramProps?.[name] ?? { type: "string" } });
  }
  if (def.query) {
    const query = plain(def.query);
    const required = new Set((query.required as string[] | undefined) ?? []);
    for (const [name, schema] of Object.entries((query.properties as Record<string, JsonObject>) ?? {})) {
      const { description, ...rest } = schema;
      out.push({ name, in: "query", required: required.has(name), schema: rest, ...(description ? { description } : {}) });
    }
  }
  return out;
}

function operation(route: RegisteredRoute): JsonObject {
  const { def } = route;
  const auth = def.auth ?? "user";
  const success = String(def.successStatus ?? 200);
  const responses: JsonObject = {
    [success]: def.response
      ? { description: "Success", content: { "application/json": { schema: plain(def.response) } } }
      : { description: success === "204" ? "No content" : "Success" },
  };
  const errorStatuses = ["400", "422", "429", "500"];
  if (auth !== "public") errorStatuses.push("401", "403");
  if (def.params || def.path.includes(":")) errorStatuses.push("404");
  if (def.body) errorStatuses.push("413");
  for (const status of errorStatuses.sort()) {
    responses[status] = { description: ERROR_DESCRIPTIONS[status], content: { "application/json": { schema: ERROR_REF } } };
  }
  const op: JsonObject = {
    operationId: `${def.method}${toOpenApiPath(def.path)
      .replace(/[{}]/g, "")
      .replace(/[^A-Za-z0-9]+(.)?/g, (_m, ch: string | undefined) => (ch ?? "").toUpperCase())}`,
    summary: def.summary,
    tags: [def.tag],
    security: auth === "public" ? [] : [{ bearerAuth: [] }],
    parameters: parameters(route),
    responses,
  };
  if (def.permission) op["x-permission"] = def.permission;
  if (auth === "workload") op["x-auth"] = "workload";
  if (def.body) op.requestBody = { required: true, content: { "application/json": { schema: plain(def.body) } } };
  return op;
}

/** The OpenAPI 3.1 document for every route in `registry`. */
export function buildOpenApiDocument(registry: RouteRegistry, info: { title: string; version: string }): JsonObject {
  const paths: Record<string, JsonObject> = {};
  for (const route of registry.routes) {
    const path = toOpenApiPath(route.def.path);
    paths[path] ??= {};
    paths[path][route.def.method] = operation(route);
  }
  return {
    openapi: "3.1.0",
    info: { title: info.title, version: info.version },
    jsonSchemaDialect: "https://json-schema.org/draft/2020-12/schema",
    paths,
    components: {
      schemas: { ErrorEnvelope: plain(ErrorEnvelopeSchema) },
      securitySchemes: { bearerAuth: { type: "http", scheme: "bearer", bearerFormat: "JWT" } },
    },
  };
}

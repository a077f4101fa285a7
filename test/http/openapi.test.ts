/** `GET /api/v1/openapi.json`: an OpenAPI 3.1 document covering every registered route. */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { toOpenApiPath } from "../../src/http/openapi.js";
import { CreateUserSchema } from "../../src/http/routes/users.js";
import { isDateTime } from "../../src/http/schema-formats.js";
import { startTestApp, type TestApp } from "../support/http-app.js";

type Json = Record<string, any>;

/** Every `$ref` in `node`. */
function refs(node: unknown, out: string[] = []): string[] {
  if (Array.isArray(node)) node.forEach((n) => refs(n, out));
  else if (node && typeof node === "object") {
    for (const [key, value] of Object.entries(node)) {
      if (key === "$ref" && typeof value === "string") out.push(value);
      else refs(value, out);
    }
  }
  return out;
}

describe("OpenAPI document", () => {
  let t: TestApp;
  let doc: Json;
  before(async () => {
    t = await startTestApp();
    const res = await t.request("GET", "/api/v1/openapi.json");
    assert.equal(res.status, 200, res.text);
    assert.match(res.headers.get("content-type") ?? "", /application\/json/);
    doc = res.json;
  });
  after(() => t.close());

  it("is OpenAPI 3.1 with info, bearer security and the error envelope schema", () => {
    assert.equal(doc.openapi, "3.1.0");
    assert.equal(doc.info.version, "0.1.0-test");
    assert.deepEqual(doc.components.securitySchemes.bearerAuth, { type: "http", scheme: "bearer", bearerFormat: "JWT" });
    const envelope = doc.components.schemas.ErrorEnvelope;
    assert.deepEqual(Object.keys(envelope.properties.error.properties).sort(), ["code", "message", "status"]);
    for (const ref of refs(doc)) {
      assert.match(ref, /^#\/components\/schemas\//);
      assert.ok(doc.components.schemas[ref.split("/").pop()!], ref);
    }
  });

  it("lists every registered route once, with OpenAPI path syntax", () => {
    const operations = Object.entries(doc.paths as Record<string, Json>).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m} ${path}`));
    const expected = t.registry.routes.map((r) => `${r.def.method} ${toOpenApiPath(r.def.path)}`);
    assert.deepEqual(operations.sort(), [...new Set(expected)].sort());
    assert.equal(expected.length, new Set(expected).size, "no route registered twice");
    for (const path of Object.keys(doc.paths)) assert.ok(!path.includes(":"), path);
    for (const must of ["post /api/v1/auth/login", "get /api/v1/users/{username}", "get /api/v1/audit", "get /api/v1/groups/{name}", "get /metrics"]) {
      assert.ok(operations.includes(must), must);
    }
  });

  it("describes security, permissions, parameters, bodies and error responses of each operation", () => {
    for (const { def } of t.registry.routes) {
      const op = doc.paths[toOpenApiPath(def.path)][def.method];
      const auth = def.auth ?? "user";
      assert.deepEqual(op.security, auth === "public" ? [] : [{ bearerAuth: [] }], def.path);
      assert.equal(op["x-permission"], def.permission);
      assert.equal(typeof op.operationId, "string");
      const pathParams = op.parameters.filter((p: Json) => p.in === "path").map((p: Json) => p.name);
      assert.deepEqual(
        pathParams,
        [...def.path.matchAll(/:(\w+)/g)].map((m) => m[1]),
        def.path,
      );
      assert.ok(op.responses[String(def.successStatus ?? 200)], `${def.method} ${def.path} success response`);
      assert.deepEqual(op.responses["500"].content["application/json"].schema, { $ref: "#/components/schemas/ErrorEnvelope" });
      if (auth !== "public") {
        assert.ok(op.responses["401"] && op.responses["403"], def.path);
      }
      if (def.body) assert.ok(op.requestBody.content["application/json"].schema, def.path);
    }
    const ids = t.registry.routes.map(({ def }) => doc.paths[toOpenApiPath(def.path)][def.method].operationId);
    assert.equal(new Set(ids).size, ids.length, "operation ids are unique");
  });

  it("embeds the typebox schemas as JSON Schema", () => {
    const create = doc.paths["/api/v1/users"].post;
    assert.deepEqual(create.requestBody.content["application/json"].schema, JSON.parse(JSON.stringify(CreateUserSchema)));
    assert.ok(create.responses["201"].content["application/json"].schema.properties.username);
    const audit = doc.paths["/api/v1/audit"].get;
    const names = audit.parameters.map((p: Json) => p.name);
    for (const name of ["page", "pageSize", "offset", "limit", "cursor"]) assert.ok(names.includes(name), name);
    assert.ok(audit.parameters.every((p: Json) => p.in === "query" && p.required === false));
  });

  it("converts hono paths", () => {
    assert.equal(toOpenApiPath("/api/v1/groups/:name"), "/api/v1/groups/{name}");
    assert.equal(toOpenApiPath("/a/:id{[0-9]+}/b/:rest?"), "/a/{id}/b/{rest}");
  });
});

describe("schema formats", () => {
  it("accept RFC 3339 date-times naming real instants only", () => {
    for (const ok of ["2026-01-15T12:00:00.000Z", "2026-01-15T12:00:00Z", "2026-01-15T12:00:00+02:00"]) assert.ok(isDateTime(ok), ok);
    for (const bad of ["2026-01-15", "2026-13-45T99:00:00Z", "yesterday", "", "2026-01-15 12:00:00Z"]) assert.ok(!isDateTime(bad), bad);
  });
});

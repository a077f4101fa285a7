/**
 * The authorization matrix: every route in the registry (core and domain) x ADMIN, OPERATOR, VIEWER
 * and anonymous, on a real server. Anonymous callers get 401 on every non-public route; a role gets
 * 403 exactly when it lacks the route's permission; nothing answers 5xx; a successful response
 * matches the route's declared response schema.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { BUILT_IN_ROLES, isKnownPermission } from "../../src/auth/permissions.js";
import type { RouteDef } from "../../src/http/route.js";
import { Value } from "@sinclair/typebox/value";
import { MATRIX_ROLES, startTestApp, type TestApp } from "../support/http-app.js";

/** Path parameters become a value no resource has, so handlers answer 404 instead of changing state. */
function concretePath(def: RouteDef): string {
  return def.path.replace(/:(\w+)(\{[^}]*\})?\??/g, (_m, name: string) => `matrix-${name}-absent`);
}

function expectedStatusKind(def: RouteDef, role: string | null): "unauthorized" | "forbidden" | "allowed" {
  const auth = def.auth ?? "user";
  if (auth === "public") return "allowed";
  if (role === null || auth === "workload") return "unauthorized";
  const permissions = new Set(BUILT_IN_ROLES.find((r) => r.name === role)!.permissions);
  return def.permission === undefined || permissions.has(def.permission) ? "allowed" : "forbidden";
}

describe("authorization matrix", () => {
  let t: TestApp;
  const tokens = new Map<string, string>();
  before(async () => {
    t = await startTestApp();
    for (const role of MATRIX_ROLES) if (role) tokens.set(role, await t.tokenFor(role));
  });
  after(() => t.close());

  it("covers the core and the domain routes, each naming a catalog permission", () => {
    const paths = new Set(t.registry.routes.map((r) => `${r.def.method.toUpperCase()} ${r.def.path}`));
    for (const must of [
      "POST /api/v1/auth/login",
      "GET /api/v1/users",
      "DELETE /api/v1/roles/:name",
      "GET /api/v1/audit",
      "GET /api/v1/system/ready",
      "GET /api/v1/groups",
      "GET /api/v1/services/:id",
      "GET /api/v1/crashes",
      "POST /api/v1/nodes/:id/drain",
      "POST /api/v1/admin/tokens",
      "GET /api/v1/overview",
    ]) {
      assert.ok(paths.has(must), `${must} is registered`);
    }
    for (const { def } of t.registry.routes) {
      if (def.permission !== undefined) assert.ok(isKnownPermission(def.permission), `${def.method} ${def.path}: ${def.permission} is in the catalog`);
    }
  });

  it("answers 401 / 403 / allowed exactly as the role's permissions say, and never 5xx", async () => {
    const problems: string[] = [];
    let cells = 0;
    for (const { def } of t.registry.routes) {
      for (const role of MATRIX_ROLES) {
        const method = def.method.toUpperCase();
        const res = await t.request(method, concretePath(def), {
          token: role ? tokens.get(role) : null,
          body: method === "GET" || method === "DELETE" ? undefined : {},
        });
        cells++;
        const cell = `${method} ${def.path} as ${role ?? "anonymous"} -> ${res.status} ${res.text.slice(0, 120)}`;
        const expected = expectedStatusKind(def, role);
        if (res.status >= 500) problems.push(`5xx: ${cell}`);
        if (res.status >= 400 && res.headers.get("content-type")?.includes("json") && typeof res.json?.error?.code !== "string") {
          problems.push(`no envelope: ${cell}`);
        }
        if (expected === "unauthorized" && (res.status !== 401 || res.json?.error?.code !== "UNAUTHORIZED")) problems.push(`want 401: ${cell}`);
        if (expected === "forbidden" && (res.status !== 403 || res.json?.error?.code !== "FORBIDDEN")) problems.push(`want 403: ${cell}`);
        if (res.status === (def.successStatus ?? 200) && def.response && !Value.Check(def.response, res.json)) {
          const first = Value.Errors(def.response, res.json).First();
          problems.push(`response does not match its schema (${first?.path}: ${first?.message}): ${cell}`);
        }
        if (expected === "allowed" && (res.status === 403 || ((def.auth ?? "user") !== "public" && res.status === 401))) {
          problems.push(`want access: ${cell}`);
        }
      }
    }
    assert.equal(cells, t.registry.routes.length * MATRIX_ROLES.length);
    assert.deepEqual(problems, []);
  });

  it("keeps the spec's ADMIN-only permissions away from OPERATOR and VIEWER", async () => {
    for (const role of ["OPERATOR", "VIEWER"]) {
      const token = tokens.get(role)!;
      assert.equal((await t.request("GET", "/api/v1/audit", { token })).status, 403, `${role} audit.view`);
      assert.equal((await t.request("GET", "/api/v1/users", { token })).status, 403, `${role} users.manage`);
    }
    assert.equal((await t.request("GET", "/api/v1/audit", { token: tokens.get("ADMIN") })).status, 200);
  });
});

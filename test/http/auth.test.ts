/**
 * Authentication and authorization on a real server: login, 401 and 403, the first-start admin,
 * the persisted signing secret across restarts, and the users and roles routes with their audit
 * records.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SignJWT } from "jose";
import { Hono } from "hono";
import { addRoute, type RouteModule } from "../../src/http/route.js";
import type { AppEnv } from "../../src/http/types.js";
import { hashPassword, verifyPassword } from "../../src/auth/password.js";
import { loadOrCreateSigningSecret } from "../../src/auth/signing-key.js";
import { ALL_PERMISSIONS, BUILT_IN_ROLES, isKnownPermission } from "../../src/auth/permissions.js";
import { FakeClock } from "../support/fake-clock.js";
import { ADMIN_PASSWORD, startTestApp, TEST_SCRYPT, type TestApp, type TestResponse } from "../support/http-app.js";

function assertError(res: TestResponse, status: number, code: string): void {
  assert.equal(res.status, status, res.text);
  assert.equal(res.json?.error?.code, code, res.text);
  assert.equal(res.json.error.status, status);
}

/** Audit records of `action`, newest first. */
async function auditOf(t: TestApp, action: string) {
  return (await t.audit.page({ skip: 0, pageSize: 500, filter: { action } })).data;
}

describe("login and tokens", () => {
  let t: TestApp;
  let clock: FakeClock;
  before(async () => {
    clock = new FakeClock(Date.now());
    t = await startTestApp({ clock });
  });
  after(() => t.close());

  it("issues a token that identifies the user", async () => {
    const res = await t.request("POST", "/api/v1/auth/login", { body: { username: "admin", password: ADMIN_PASSWORD } });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(Object.keys(res.json).sort(), ["expiresAt", "token"]);
    assert.equal(Date.parse(res.json.expiresAt), Math.floor(clock.nowMs() / 1000) * 1000 + t.config.auth.tokenTtlSeconds * 1000);
    const me = await t.request("GET", "/api/v1/auth/me", { token: res.json.token });
    assert.equal(me.status, 200);
    assert.equal(me.json.username, "admin");
    assert.deepEqual(me.json.roles, ["ADMIN"]);
    assert.deepEqual([...me.json.permissions].sort(), [...ALL_PERMISSIONS].sort());
  });

  it("answers bad or missing credentials with 401 UNAUTHORIZED and the same message", async () => {
    const wrong = await t.request("POST", "/api/v1/auth/login", { body: { username: "admin", password: "not-the-password" } });
    const unknown = await t.request("POST", "/api/v1/auth/login", { body: { username: "nobody", password: "whatever-password" } });
    const missing = await t.request("POST", "/api/v1/auth/login", { body: {} });
    for (const res of [wrong, unknown, missing]) assertError(res, 401, "UNAUTHORIZED");
    assert.equal(wrong.json.error.message, unknown.json.error.message);
  });

  it("does not audit logins but logs them", async () => {
    await t.login("admin", ADMIN_PASSWORD);
    const all = await t.audit.page({ skip: 0, pageSize: 500 });
    assert.ok(!all.data.some((r) => r.action.startsWith("login") || r.action.startsWith("auth")));
    assert.ok(t.logLines.some((l) => l.includes("Login succeeded for user 'admin'")));
    assert.ok(t.logLines.some((l) => l.includes("Login failed for user 'nobody'")));
  });

  it("answers 401 without credentials and for unusable tokens", async () => {
    assertError(await t.request("GET", "/api/v1/users"), 401, "UNAUTHORIZED");
    assertError(await t.request("GET", "/api/v1/users", { token: "garbage" }), 401, "UNAUTHORIZED");
    assertError(await t.request("GET", "/api/v1/users", { headers: { authorization: "Basic YWRtaW46YWRtaW4=" } }), 401, "UNAUTHORIZED");
    const foreign = await new SignJWT({ name: "admin", ver: 1 })
      .setProtectedHeader({ alg: "HS256" })
      .setIssuer("cloud-controller")
      .setSubject("whoever")
      .setExpirationTime("1h")
      .sign(new Uint8Array(32).fill(7));
    assertError(await t.request("GET", "/api/v1/users", { token: foreign }), 401, "UNAUTHORIZED");
    // A bad token does not block public routes.
    assert.equal((await t.request("GET", "/api/v1/system/version", { token: "garbage" })).status, 200);
  });

  it("rejects expired tokens", async () => {
    const token = await t.login("admin", ADMIN_PASSWORD);
    assert.equal((await t.request("GET", "/api/v1/users", { token })).status, 200);
    clock.advance((t.config.auth.tokenTtlSeconds + 1) * 1000);
    const res = await t.request("GET", "/api/v1/users", { token });
    assertError(res, 401, "UNAUTHORIZED");
    assert.match(res.json.error.message, /expired/);
  });

  it("answers 403 FORBIDDEN when the role lacks the permission", async () => {
    const viewer = await t.tokenFor("VIEWER");
    const res = await t.request("GET", "/api/v1/users", { token: viewer });
    assertError(res, 403, "FORBIDDEN");
    assert.match(res.json.error.message, /users\.manage/);
    assert.equal((await t.request("GET", "/api/v1/groups", { token: viewer })).status, 200);
  });
});

describe("workload tokens", () => {
  it("are resolved by the pluggable verifier and kept apart from user routes", async () => {
    const workloadRoutes: RouteModule = (app, registry) => {
      const sub = new Hono<AppEnv>();
      addRoute(sub, registry, { method: "get", path: "/api/v1/test/workload", summary: "w", tag: "test", auth: "workload" }, ({ principal }) => ({
        username: principal!.username,
        instanceId: principal!.instanceId,
      }));
      app.route("/", sub);
    };
    const t = await startTestApp({ routeModules: [workloadRoutes] });
    try {
      t.auth.verifyWorkloadToken = async (token) =>
        token === "workload-token-1" ? { kind: "workload", username: "instance:i-1", roles: [], permissions: new Set(), instanceId: "i-1" } : null;
      const ok = await t.request("GET", "/api/v1/test/workload", { token: "workload-token-1" });
      assert.equal(ok.status, 200, ok.text);
      assert.deepEqual(ok.json, { username: "instance:i-1", instanceId: "i-1" });
      assertError(await t.request("GET", "/api/v1/test/workload", { token: await t.tokenFor("ADMIN") }), 401, "UNAUTHORIZED");
      assertError(await t.request("GET", "/api/v1/groups", { token: "workload-token-1" }), 401, "UNAUTHORIZED");
      assertError(await t.request("GET", "/api/v1/test/workload", { token: "workload-token-2" }), 401, "UNAUTHORIZED");
    } finally {
      await t.close();
    }
  });
});

describe("first start and restarts", () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "cloud-http-restart-"));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it("generates the admin password once, logs it once at WARN, and keeps the signing secret", async () => {
    const first = await startTestApp({ dir, env: {} });
    let password: string;
    let token: string;
    try {
      const warnings = first.logLines.map((l) => JSON.parse(l)).filter((r) => /generated password/.test(r.message));
      assert.equal(warnings.length, 1);
      assert.equal(warnings[0].level, "WARN");
      password = /generated password: (\S+)/.exec(warnings[0].message)![1];
      assert.equal(password.length, 24);
      token = await first.login("admin", password);
    } finally {
      await first.stop();
    }

    const second = await startTestApp({ dir, env: {} });
    try {
      assert.ok(!second.logLines.some((l) => /generated password/.test(l)), "not generated or logged again");
      assert.equal((await second.request("GET", "/api/v1/auth/me", { token })).status, 200, "the token survives a restart");
      await second.login("admin", password);
    } finally {
      await second.stop();
    }
  });

  it("takes the admin password from CLOUD_ADMIN_PASSWORD over auth.adminPassword", async () => {
    const fromConfig = await startTestApp({ env: {}, config: { auth: { adminPassword: "from-config-123" } } });
    try {
      await fromConfig.login("admin", "from-config-123");
      assert.ok(!fromConfig.logLines.some((l) => /generated password/.test(l)));
    } finally {
      await fromConfig.close();
    }
    const fromEnv = await startTestApp({ env: { CLOUD_ADMIN_PASSWORD: "from-env-12345" }, config: { auth: { adminPassword: "from-config-123" } } });
    try {
      await fromEnv.login("admin", "from-env-12345");
    } finally {
      await fromEnv.close();
    }
  });

  it("keeps one signing secret in system_secrets, even when created concurrently", async () => {
    const a = await startTestApp({ dir: join(dir, "shared") });
    const token = await a.login("admin", ADMIN_PASSWORD);
    await a.stop();
    const b = await startTestApp({ dir: join(dir, "shared") });
    try {
      assert.equal((await b.request("GET", "/api/v1/auth/me", { token })).status, 200);
      const jwtSecrets = async () => (await b.documents.collection("system_secrets").find()).filter((d) => d._id === "jwt-signing-key").length;
      assert.equal(await jwtSecrets(), 1);
      await b.documents.collection("system_secrets").delete("jwt-signing-key");
      const racing = await Promise.all([1, 2, 3].map(() => loadOrCreateSigningSecret(b.documents, new FakeClock(0))));
      assert.ok(racing.every((secret) => Buffer.from(secret).equals(Buffer.from(racing[0]))));
      assert.equal(await jwtSecrets(), 1);
    } finally {
      await b.stop();
    }
  });
});

describe("users routes", () => {
  let t: TestApp;
  let admin: string;
  before(async () => {
    t = await startTestApp();
    admin = await t.tokenFor("ADMIN");
  });
  after(() => t.close());

  it("creates, reads, lists, changes and deletes users without exposing hashes, auditing each change", async () => {
    const created = await t.request("POST", "/api/v1/users", { token: admin, body: { username: "alice", password: "alice-pass-1", roles: ["viewer"] } });
    assert.equal(created.status, 201, created.text);
    assert.deepEqual(created.json.roles, ["VIEWER"], "built-in role names are canonical");
    assert.ok(!created.text.includes("scrypt") && !("passwordHash" in created.json));

    const list = await t.request("GET", "/api/v1/users", { token: admin });
    assert.deepEqual(
      list.json.map((u: { username: string }) => u.username),
      ["admin", "alice"],
    );
    assert.ok(!list.text.includes("passwordHash"));
    assert.equal((await t.request("GET", "/api/v1/users/alice", { token: admin })).json.username, "alice");

    const aliceToken = await t.login("alice", "alice-pass-1");
    const patched = await t.request("PATCH", "/api/v1/users/alice", { token: admin, body: { roles: ["OPERATOR"], password: "alice-pass-2" } });
    assert.equal(patched.status, 200, patched.text);
    assert.deepEqual(patched.json.roles, ["OPERATOR"]);
    assertError(await t.request("GET", "/api/v1/groups", { token: aliceToken }), 401, "UNAUTHORIZED");
    await t.login("alice", "alice-pass-2");

    const deleted = await t.request("DELETE", "/api/v1/users/alice", { token: admin });
    assert.equal(deleted.status, 204);
    assertError(await t.request("GET", "/api/v1/users/alice", { token: admin }), 404, "NOT_FOUND");

    const [create] = await auditOf(t, "user.create");
    assert.equal(create.username, "admin");
    assert.equal(create.resourceType, "user");
    assert.equal(create.resourceId, "alice");
    assert.equal(create.ipAddress, "127.0.0.1");
    assert.equal(create.before, undefined);
    assert.equal(JSON.parse(create.after!).username, "alice");
    const [update] = await auditOf(t, "user.update");
    assert.deepEqual(JSON.parse(update.before!).roles, ["VIEWER"]);
    assert.deepEqual(JSON.parse(update.after!).roles, ["OPERATOR"]);
    assert.deepEqual(JSON.parse(update.details), { passwordChanged: true });
    const [del] = await auditOf(t, "user.delete");
    assert.equal(JSON.parse(del.before!).username, "alice");
    assert.equal(del.after, undefined);
    const everything = JSON.stringify(await t.audit.page({ skip: 0, pageSize: 500 }));
    assert.ok(!everything.includes("scrypt") && !everything.includes("alice-pass"), "no hashes or passwords in the audit log");
  });

  it("validates input and refuses duplicates", async () => {
    assertError(await t.request("POST", "/api/v1/users", { token: admin, body: { username: "bob", password: "short", roles: [] } }), 422, "VALIDATION_ERROR");
    const badName = await t.request("POST", "/api/v1/users", { token: admin, body: { username: "b o b", password: "long-enough", roles: [] } });
    assertError(badName, 422, "VALIDATION_ERROR");
    assert.match(badName.json.error.message, /^username/);
    const badRole = await t.request("POST", "/api/v1/users", { token: admin, body: { username: "bob", password: "long-enough", roles: ["GOD"] } });
    assertError(badRole, 422, "VALIDATION_ERROR");
    assert.match(badRole.json.error.message, /^roles/);
    assert.equal((await t.request("POST", "/api/v1/users", { token: admin, body: { username: "bob", password: "long-enough", roles: [] } })).status, 201);
    assertError(await t.request("POST", "/api/v1/users", { token: admin, body: { username: "bob", password: "long-enough", roles: [] } }), 409, "CONFLICT");
  });

  it("refuses to delete oneself or remove the last admin", async () => {
    assertError(await t.request("DELETE", "/api/v1/users/admin", { token: admin }), 409, "CANNOT_DELETE_SELF");
    assertError(await t.request("PATCH", "/api/v1/users/admin", { token: admin, body: { roles: ["VIEWER"] } }), 409, "LAST_ADMIN");
    await t.request("POST", "/api/v1/users", { token: admin, body: { username: "root2", password: "root2-password", roles: ["ADMIN"] } });
    const root2 = await t.login("root2", "root2-password");
    assert.equal((await t.request("DELETE", "/api/v1/users/admin", { token: root2 })).status, 204);
    assertError(await t.request("PATCH", "/api/v1/users/root2", { token: root2, body: { roles: [] } }), 409, "LAST_ADMIN");
  });
});

describe("roles routes", () => {
  let t: TestApp;
  let admin: string;
  before(async () => {
    t = await startTestApp();
    admin = await t.tokenFor("ADMIN");
  });
  after(() => t.close());

  it("lists the built-in roles over a catalog containing every permission the spec names", async () => {
    const res = await t.request("GET", "/api/v1/roles", { token: admin });
    assert.deepEqual(
      res.json.map((r: { name: string }) => r.name),
      ["ADMIN", "OPERATOR", "VIEWER"],
    );
    for (const name of [
      "templates.view",
      "templates.update",
      "CLUSTER_VIEW",
      "CLUSTER_MANAGE",
      "BACKUPS_VIEW",
      "BACKUPS_MANAGE",
      "BACKUPS_RESTORE",
      "audit.view",
      "system.logs.view",
      "share.invoke",
      "MODULES_MANAGE",
    ]) {
      assert.ok(isKnownPermission(name), name);
    }
    const byName = new Map(BUILT_IN_ROLES.map((r) => [r.name, new Set(r.permissions)]));
    for (const adminOnly of ["audit.view", "system.logs.view", "share.invoke", "users.manage", "roles.manage", "CLUSTER_MANAGE", "BACKUPS_RESTORE"]) {
      assert.ok(!byName.get("OPERATOR")!.has(adminOnly), adminOnly);
      assert.ok(!byName.get("VIEWER")!.has(adminOnly), adminOnly);
    }
    assert.ok(byName.get("OPERATOR")!.has("groups.create"));
    assert.ok([...byName.get("VIEWER")!].every((p) => /view|VIEW/.test(p)));
    const catalog = await t.request("GET", "/api/v1/permissions", { token: await t.tokenFor("VIEWER") });
    assert.equal(catalog.json.length, ALL_PERMISSIONS.length);
  });

  it("creates custom roles whose permissions apply immediately, and audits role changes", async () => {
    const created = await t.request("POST", "/api/v1/roles", {
      token: admin,
      body: { name: "group-reader", description: "reads groups", permissions: ["groups.view"] },
    });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.json.builtIn, false);
    await t.request("POST", "/api/v1/users", { token: admin, body: { username: "carol", password: "carol-password", roles: ["group-reader"] } });
    const carol = await t.login("carol", "carol-password");
    assert.equal((await t.request("GET", "/api/v1/groups", { token: carol })).status, 200);
    assertError(await t.request("GET", "/api/v1/nodes", { token: carol }), 403, "FORBIDDEN");

    const patched = await t.request("PATCH", "/api/v1/roles/group-reader", { token: admin, body: { permissions: ["groups.view", "nodes.view"] } });
    assert.equal(patched.status, 200, patched.text);
    assert.equal((await t.request("GET", "/api/v1/nodes", { token: carol })).status, 200);

    assertError(await t.request("DELETE", "/api/v1/roles/group-reader", { token: admin }), 409, "ROLE_IN_USE");
    await t.request("PATCH", "/api/v1/users/carol", { token: admin, body: { roles: [] } });
    assert.equal((await t.request("DELETE", "/api/v1/roles/group-reader", { token: admin })).status, 204);
    assertError(await t.request("GET", "/api/v1/roles/group-reader", { token: admin }), 404, "NOT_FOUND");

    assert.equal((await auditOf(t, "role.create")).length, 1);
    const [update] = await auditOf(t, "role.update");
    assert.deepEqual(JSON.parse(update.before!).permissions, ["groups.view"]);
    assert.deepEqual(JSON.parse(update.after!).permissions, ["groups.view", "nodes.view"]);
    const [del] = await auditOf(t, "role.delete");
    assert.equal(del.resourceId, "group-reader");
  });

  it("validates permissions against the catalog and protects built-in roles", async () => {
    const bad = await t.request("POST", "/api/v1/roles", { token: admin, body: { name: "x", permissions: ["groups.fly"] } });
    assertError(bad, 422, "VALIDATION_ERROR");
    assert.match(bad.json.error.message, /^permissions: .*groups\.fly/);
    assertError(await t.request("POST", "/api/v1/roles", { token: admin, body: { name: "viewer", permissions: [] } }), 409, "CONFLICT");
    assertError(await t.request("PATCH", "/api/v1/roles/ADMIN", { token: admin, body: { permissions: [] } }), 400, "PROTECTED");
    assertError(await t.request("DELETE", "/api/v1/roles/VIEWER", { token: admin }), 400, "PROTECTED");
  });
});

describe("password hashing", () => {
  it("uses salted scrypt hashes that verify and never repeat", async () => {
    const a = await hashPassword("correct horse", TEST_SCRYPT);
    const b = await hashPassword("correct horse", TEST_SCRYPT);
    assert.notEqual(a, b);
    assert.match(a, /^scrypt\$4096\$8\$1\$/);
    assert.equal(await verifyPassword("correct horse", a), true);
    assert.equal(await verifyPassword("wrong horse", a), false);
    assert.equal(await verifyPassword("correct horse", "scrypt$1099511627776$8$1$x$y"), false, "absurd costs are refused");
    assert.equal(await verifyPassword("x", "plain"), false);
    assert.match(await hashPassword("default cost"), /^scrypt\$32768\$8\$1\$/);
  });
});

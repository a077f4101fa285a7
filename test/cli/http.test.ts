// The REST client as the operator sees it: exit codes, retries, --json output and --verbose redaction.
import assert from "node:assert/strict";
import { createServer } from "node:net";
import { after, before, describe, test } from "node:test";
import { envelope, homeWithContext, runCli, startFakeController, type FakeController } from "./harness.js";

/** A port nothing listens on: bind an ephemeral port, then close it. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const groupsBody =
  '[{"name":"lobby","platform":"paper","minInstances":1,"maxInstances":4,"runningInstances":2,"totalPlayers":7,"maintenance":false,"static":false}]';

describe("cloudctl HTTP behaviour", () => {
  let server: FakeController;
  let flakyCalls = 0;
  before(async () => {
    server = await startFakeController((app) => {
      app.get("/api/v1/groups", (c) => c.body(groupsBody, 200, { "content-type": "application/json" }));
      app.get("/api/v1/groups/unauthorized", (c) => c.json(envelope(401, "UNAUTHORIZED", "Authentication required"), 401));
      app.get("/api/v1/groups/forbidden", (c) => c.json(envelope(403, "FORBIDDEN", "Permission denied"), 403));
      app.get("/api/v1/groups/conflict", (c) => c.json(envelope(409, "CONFLICT", "busy"), 409));
      app.get("/api/v1/groups/bad", (c) => c.json(envelope(400, "BAD_REQUEST", "malformed"), 400));
      app.get("/api/v1/groups/flaky", (c) => {
        flakyCalls++;
        if (flakyCalls <= 2) return c.json(envelope(503, "UNAVAILABLE", "try later"), 503);
        return c.json({ name: "flaky", minInstances: 1, runningInstances: 1 });
      });
      app.get("/api/v1/groups/down", (c) => c.json(envelope(500, "INTERNAL_ERROR", "Internal error"), 500));
      app.get("/api/v1/groups/:name", (c) => c.json(envelope(404, "NOT_FOUND", `Group not found: ${c.req.param("name")}`), 404));
      app.post("/api/v1/groups/:group/start", (c) => c.json(envelope(503, "UNAVAILABLE", "try later"), 503));
    });
  });
  after(() => server.close());

  test("exit codes: 0, 1 (400, 409, 500), 2 (401), 3 (403), 4 (404), 5 (connection refused); --help lists them", async () => {
    const { home, dispose } = homeWithContext(server.url);
    try {
      const port = await closedPort();
      const cases: [string[], number][] = [
        [["group", "list"], 0],
        [["group", "info", "bad"], 1],
        [["group", "info", "conflict"], 1],
        [["group", "info", "unauthorized"], 2],
        [["group", "info", "forbidden"], 3],
        [["group", "info", "missing"], 4],
        [["group", "list", "--controller", `http://127.0.0.1:${port}`], 5],
        [["--help"], 0],
      ];
      const results = await Promise.all(cases.map(([args]) => runCli(args, { home })));
      results.forEach((result, index) => assert.equal(result.code, cases[index][1], `${cases[index][0].join(" ")}: ${result.stderr}`));
      assert.match(results[5].stderr, /Group not found: missing \(NOT_FOUND, HTTP 404\)/);
      assert.match(results[6].stderr, /cannot reach controller/);
      assert.match(
        results[7].stdout,
        /Exit codes:\n {2}0 {2}success\n {2}1 .*\n {2}2 .*401.*\n {2}3 .*403.*\n {2}4 .*404.*\n {2}5 {2}controller unreachable/,
        "--help lists the exit codes",
      );
      assert.equal(server.requests.filter((r) => r.path === "/api/v1/groups/bad").length, 1, "400 is not retried");
      assert.equal(server.requests.filter((r) => r.path === "/api/v1/groups/conflict").length, 1, "409 is not retried");
    } finally {
      dispose();
    }
  });

  test("GET retries 5xx: two 503 then 200 succeeds after 3 requests; 500 gives up after 3; POST is never retried", async () => {
    const { home, dispose } = homeWithContext(server.url);
    try {
      const [flaky, down, post] = await Promise.all([
        runCli(["group", "info", "flaky", "--json"], { home }),
        runCli(["group", "info", "down"], { home }),
        runCli(["instance", "start", "lobby"], { home }),
      ]);
      assert.equal(flaky.code, 0, flaky.stderr);
      assert.deepEqual(JSON.parse(flaky.stdout), { name: "flaky", minInstances: 1, runningInstances: 1 });
      assert.equal(server.requests.filter((r) => r.path === "/api/v1/groups/flaky").length, 3);
      assert.equal(down.code, 1);
      assert.equal(server.requests.filter((r) => r.path === "/api/v1/groups/down").length, 3, "at most 3 attempts");
      assert.equal(post.code, 1);
      assert.equal(server.requests.filter((r) => r.path === "/api/v1/groups/lobby/start").length, 1, "POST is not retried");
    } finally {
      dispose();
    }
  });

  test("--json and CLOUD_OUTPUT=json print exactly the server's body; human output is a table", async () => {
    const { home, dispose } = homeWithContext(server.url);
    try {
      const [json, env, human] = await Promise.all([
        runCli(["group", "list", "--json", "--sort", "players", "--filter", "zzz"], { home }),
        runCli(["group", "list"], { home, env: { CLOUD_OUTPUT: "json" } }),
        runCli(["group", "list"], { home }),
      ]);
      assert.equal(json.stdout, `${groupsBody}\n`, "filter and sort are ignored with --json");
      assert.equal(env.stdout, `${groupsBody}\n`);
      assert.match(human.stdout, /NAME\s+STATUS\s+PLATFORM/);
      assert.match(human.stdout, /lobby\s+UP\s+paper/);
      assert.ok(!human.stdout.includes("\x1b["), "no colour when stdout is not a terminal");
    } finally {
      dispose();
    }
  });

  test("--verbose prints request and response lines to stderr with the token redacted", async () => {
    const token = "very-secret-token-value";
    const { home, dispose } = homeWithContext(server.url, token);
    try {
      const [fromContext, fromFlag] = await Promise.all([
        runCli(["-v", "group", "list"], { home }),
        runCli(["group", "list", "--verbose", "--token", "flag-secret-token"], { home }),
      ]);
      assert.equal(fromContext.code, 0, fromContext.stderr);
      assert.match(fromContext.stderr, new RegExp(`> GET ${server.url}/api/v1/groups`));
      assert.match(fromContext.stderr, /> Authorization: Bearer <redacted>/);
      assert.match(fromContext.stderr, /< 200 OK/);
      assert.ok(!fromContext.stderr.includes(token) && !fromContext.stdout.includes(token));
      assert.ok(!fromFlag.stderr.includes("flag-secret-token"));
      assert.equal(server.requests.filter((r) => r.authorization === `Bearer ${token}`).length >= 1, true, "the real token is sent");
    } finally {
      dispose();
    }
  });
});

// Group and instance commands against a fake controller: request bodies and the delete confirmation.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { bodiesOf, homeWithContext, runCli, startFakeController, type FakeController } from "./harness.js";

describe("cloudctl group commands", () => {
  let server: FakeController;
  const bodies = (method: string, path: string) => bodiesOf(server, method, path);
  before(async () => {
    server = await startFakeController((app) => {
      app.post("/api/v1/groups", async (c) => c.json(await c.req.json(), 201));
      app.patch("/api/v1/groups/:name", async (c) => c.json({ name: c.req.param("name"), ...(await c.req.json()) }));
      app.delete("/api/v1/groups/:name", (c) => c.body(null, 204));
      app.post("/api/v1/services/:id/command", (c) => c.json({ ok: true }));
    });
  });
  after(() => server.close());

  test("group delete asks first: No cancels with exit 0 and sends nothing; yes and --yes delete", async () => {
    const { home, dispose } = homeWithContext(server.url);
    try {
      const [no, eof, yes, flag] = await Promise.all([
        runCli(["group", "delete", "alpha", "--json"], { home, stdin: "n\n" }),
        runCli(["group", "delete", "beta"], { home, stdin: "" }),
        runCli(["group", "delete", "gamma"], { home, stdin: "yes\n" }),
        runCli(["group", "delete", "delta", "--yes"], { home }),
      ]);
      assert.equal(no.code, 0, no.stderr);
      assert.match(no.stderr, /Delete group "alpha"/, "the prompt is shown even with --json");
      assert.equal(eof.code, 0, eof.stderr);
      assert.equal(yes.code, 0, yes.stderr);
      assert.equal(flag.code, 0, flag.stderr);
      const deleted = server.requests
        .filter((r) => r.method === "DELETE")
        .map((r) => r.path)
        .sort();
      assert.deepEqual(deleted, ["/api/v1/groups/delta", "/api/v1/groups/gamma"]);
    } finally {
      dispose();
    }
  });

  test("group create sends the client defaults; update sends only the flags given; maintenance on/off; exec joins words", async () => {
    const { home, dispose } = homeWithContext(server.url);
    try {
      const results = await Promise.all([
        runCli(["group", "create", "--name", "lobby", "--platform", "paper"], { home }),
        runCli(["group", "create", "--name", "bw", "--platform", "paper", "--template", "base", "--template", "bw", "--min", "2", "--port-start", "40000"], {
          home,
        }),
        runCli(["group", "update", "lobby", "--max", "20", "--routing", "ROUND_ROBIN"], { home }),
        runCli(["group", "maintenance", "m-on", "ON"], { home }),
        runCli(["group", "maintenance", "m-one", "1"], { home }),
        runCli(["group", "maintenance", "m-off", "yes"], { home }),
        runCli(["instance", "exec", "inst-1", "say", "hello", "world"], { home }),
        runCli(["group", "update", "lobby"], { home }),
      ]);
      results.slice(0, 7).forEach((r, i) => assert.equal(r.code, 0, `command ${i}: ${r.stderr}`));
      assert.equal(results[7].code, 1, "update without flags is refused");
      const created = bodies("POST", "/api/v1/groups");
      const lobby = created.find((b) => b.name === "lobby");
      assert.deepEqual(lobby, {
        name: "lobby",
        platform: "paper",
        jarFile: "server.jar",
        templates: [],
        scalingMode: "DYNAMIC",
        minInstances: 1,
        maxInstances: 10,
        memoryMb: 1024,
        routing: "LOWEST_PLAYERS",
        portRange: { start: 30000, end: 30100 },
      });
      const bw = created.find((b) => b.name === "bw");
      assert.deepEqual(bw.templates, ["base", "bw"]);
      assert.equal(bw.minInstances, 2);
      assert.deepEqual(bw.portRange, { start: 40000, end: 30100 });
      assert.deepEqual(bodies("PATCH", "/api/v1/groups/lobby"), [{ maxInstances: 20, routing: "ROUND_ROBIN" }]);
      assert.deepEqual(bodies("PATCH", "/api/v1/groups/m-on"), [{ maintenance: true }]);
      assert.deepEqual(bodies("PATCH", "/api/v1/groups/m-one"), [{ maintenance: true }]);
      assert.deepEqual(bodies("PATCH", "/api/v1/groups/m-off"), [{ maintenance: false }]);
      assert.deepEqual(bodies("POST", "/api/v1/services/inst-1/command"), [{ command: "say hello world" }]);
    } finally {
      dispose();
    }
  });
});

// Group and instance commands against a fake controller: request bodies and the delete confirmation.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { loadScalingText } from "../../src/cli/commands/group.js";
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

  test("group delete without --yes on a piped stdin is refused with exit 6 and sends nothing, whatever is piped; --yes deletes", async () => {
    const { home, dispose } = homeWithContext(server.url);
    try {
      const [no, eof, yes, flag] = await Promise.all([
        runCli(["group", "delete", "alpha", "--json"], { home, stdin: "n\n" }),
        runCli(["group", "delete", "beta"], { home, stdin: "" }),
        runCli(["group", "delete", "gamma"], { home, stdin: "yes\n" }),
        runCli(["group", "delete", "delta", "--yes"], { home }),
      ]);
      for (const refused of [no, eof, yes]) {
        assert.equal(refused.code, 6, refused.stderr);
        assert.match(refused.stderr, /stdin is not a terminal.*pass --yes/);
      }
      assert.match(no.stderr, /Delete group "alpha"/, "the refusal names the question, also with --json");
      assert.equal(flag.code, 0, flag.stderr);
      const deleted = server.requests
        .filter((r) => r.method === "DELETE")
        .map((r) => r.path)
        .sort();
      assert.deepEqual(deleted, ["/api/v1/groups/delta"]);
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
        runCli(["instance", "exec", "inst-1", "say", "hello", "world", "--wait", "0"], { home }),
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
  test("load thresholds: create and update send loadScaling as a whole; --no-load-scaling sends null; a duration alone is refused", async () => {
    const { home, dispose } = homeWithContext(server.url);
    try {
      const results = await Promise.all([
        runCli(["group", "create", "--name", "pvp", "--platform", "paper", "--min-tps", "18.5", "--load-sustain", "45"], { home }),
        runCli(["group", "update", "pvp-a", "--max-mspt", "45", "--min-tps", "17", "--load-cooldown", "300"], { home }),
        runCli(["group", "update", "pvp-b", "--no-load-scaling", "--max", "4"], { home }),
        runCli(["group", "update", "pvp-c", "--load-sustain", "10"], { home }),
        runCli(["group", "create", "--name", "pvp-d", "--platform", "paper", "--load-cooldown", "10"], { home }),
        runCli(["group", "update", "pvp-e", "--min-tps", "0"], { home }),
        runCli(["group", "update", "pvp-f", "--min-tps", "18", "--no-load-scaling"], { home }),
      ]);
      results.slice(0, 3).forEach((r, i) => assert.equal(r.code, 0, `command ${i}: ${r.stderr}`));
      assert.deepEqual(bodies("POST", "/api/v1/groups").find((b) => b.name === "pvp")?.loadScaling, { minTps: 18.5, sustainSeconds: 45 });
      assert.deepEqual(bodies("PATCH", "/api/v1/groups/pvp-a"), [{ loadScaling: { minTps: 17, maxMsptAvg: 45, cooldownSeconds: 300 } }]);
      assert.deepEqual(bodies("PATCH", "/api/v1/groups/pvp-b"), [{ maxInstances: 4, loadScaling: null }]);
      for (const [i, pattern] of [
        [3, /need --min-tps or --max-mspt/],
        [4, /need --min-tps or --max-mspt/],
        [5, /expected a number above 0/],
        [6, /cannot be combined/],
      ] as const) {
        assert.notEqual(results[i].code, 0, `command ${i} is refused`);
        assert.match(results[i].stderr, pattern);
      }
      assert.equal(
        bodies("POST", "/api/v1/groups").find((b) => b.name === "pvp-d"),
        undefined,
        "nothing sent",
      );
      for (const name of ["pvp-c", "pvp-e", "pvp-f"]) assert.deepEqual(bodies("PATCH", `/api/v1/groups/${name}`), [], `nothing sent for ${name}`);
    } finally {
      dispose();
    }
  });
  test("group info's Load line", () => {
    assert.equal(loadScalingText(null), "off (player fill only)");
    assert.equal(
      loadScalingText({ minTps: 18, maxMsptAvg: 45, sustainSeconds: 30, cooldownSeconds: 120 }),
      "+1 instance when mean TPS below 18 or mean MSPT above 45 for 30 s (cooldown 120 s)",
    );
  });
});

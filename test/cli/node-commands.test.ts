// Node commands against a fake controller: the action routes, the delete confirmation and --force,
// and how a refusal of the controller is shown.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { envelope, homeWithContext, runCli, startFakeController, type FakeController } from "./harness.js";

describe("cloudctl node commands", () => {
  let server: FakeController;
  before(async () => {
    server = await startFakeController((app) => {
      app.post("/api/v1/nodes/busy/uncordon", (c) => c.json(envelope(409, "INVALID_STATE", "Node busy is not cordoned"), 409));
      app.post("/api/v1/nodes/:id/:action", (c) => c.json({ id: c.req.param("id"), state: "ONLINE", cordoned: c.req.param("action") === "cordon" }));
      const busy = envelope(409, "CONFLICT", "Node busy has 1 live instance; pass force=true to delete it anyway");
      app.delete("/api/v1/nodes/busy", (c) => (c.req.query("force") === "true" ? c.body(null, 204) : c.json(busy, 409)));
      app.delete("/api/v1/nodes/:id", (c) => c.body(null, 204));
    });
  });
  after(() => server.close());

  const seen = (method: string) => server.requests.filter((r) => r.method === method).map((r) => `${r.path}${r.query.force ? `?force=${r.query.force}` : ""}`);

  test("cordon, uncordon, revoke-cert and unrevoke-cert POST to the node's action route", async () => {
    const { home, dispose } = homeWithContext(server.url);
    try {
      const actions = ["cordon", "uncordon", "revoke-cert", "unrevoke-cert"];
      const results = await Promise.all(actions.map((action) => runCli(["node", action, "node-1"], { home })));
      results.forEach((r, i) => assert.equal(r.code, 0, `${actions[i]}: ${r.stderr}`));
      assert.match(results[0]!.stdout, /node node-1 cordoned \(ONLINE\)/);
      assert.match(results[2]!.stdout, /node node-1 certificate revoked/);
      assert.deepEqual(seen("POST").sort(), actions.map((a) => `/api/v1/nodes/node-1/${a}`).sort());

      const json = await runCli(["node", "cordon", "node-2", "--json"], { home });
      assert.deepEqual(JSON.parse(json.stdout), { id: "node-2", state: "ONLINE", cordoned: true });
    } finally {
      dispose();
    }
  });

  test("delete without --yes on a piped stdin is refused with exit 6 (nothing sent); --yes deletes; --force sends force=true", async () => {
    const { home, dispose } = homeWithContext(server.url);
    try {
      const [no, yes, flag, forced] = await Promise.all([
        runCli(["node", "delete", "alpha"], { home, stdin: "n\n" }),
        runCli(["node", "delete", "beta"], { home, stdin: "yes\n" }),
        runCli(["node", "rm", "gamma", "--yes"], { home }),
        runCli(["node", "delete", "busy", "--force", "--yes"], { home }),
      ]);
      for (const r of [no, yes]) assert.equal(r.code, 6, r.stderr);
      for (const r of [flag, forced]) assert.equal(r.code, 0, r.stderr);
      assert.match(no.stderr, /Delete node "alpha"\?.*pass --yes/);
      assert.match(flag.stdout, /deleted node gamma/);
      assert.deepEqual(seen("DELETE").sort(), ["/api/v1/nodes/busy?force=true", "/api/v1/nodes/gamma"]);
    } finally {
      dispose();
    }
  });

  test("a refusal of the controller is shown with its message and exits 1", async () => {
    const { home, dispose } = homeWithContext(server.url);
    try {
      const [busy, uncordon] = await Promise.all([runCli(["node", "delete", "busy", "--yes"], { home }), runCli(["node", "uncordon", "busy"], { home })]);
      assert.equal(busy.code, 1);
      assert.match(busy.stderr, /Node busy has 1 live instance; pass force=true to delete it anyway/);
      assert.equal(uncordon.code, 1);
      assert.match(uncordon.stderr, /Node busy is not cordoned/);
    } finally {
      dispose();
    }
  });
});

// cloudctl deploy against a fake controller: the create body from the flags, the flags' bounds
// refused locally (exit 1, nothing sent), the spec's exit codes for 409 and 404, the subcommands'
// requests, and --watch following a deployment to its end (exit 0 when COMPLETED, 1 when rolled back).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { bodiesOf, homeWithContext, runCli, startFakeController, type FakeController } from "./harness.js";

describe("cloudctl deploy", () => {
  let server: FakeController;
  const reads = new Map<string, number>();
  before(async () => {
    server = await startFakeController((app) => {
      app.post("/api/v1/groups/:group/deployments", async (c) => {
        const group = c.req.param("group");
        if (group === "busy") return c.json({ error: { code: "DEPLOYMENT_ACTIVE", message: "Group busy already has an active deployment", status: 409 } }, 409);
        if (group === "gone") return c.json({ error: { code: "NOT_FOUND", message: "Group not found: gone", status: 404 } }, 404);
        return c.json({ group, revision: 5, previousRevision: 4, state: "IN_PROGRESS", phase: "ROLLING", ...(await c.req.json()) }, 201);
      });
      app.get("/api/v1/groups/:group/deployments", (c) =>
        c.json([{ group: c.req.param("group"), revision: 5, state: "COMPLETED", phase: "DONE", previousRevision: 4 }]),
      );
      app.get("/api/v1/groups/:group/deployments/:rev", (c) => {
        const group = c.req.param("group");
        const n = (reads.get(group) ?? 0) + 1;
        reads.set(group, n);
        const final = group === "bad" ? { state: "ROLLED_BACK", reason: "health gate failed: bad-1 crashed" } : { state: "COMPLETED", reason: null };
        const state = n < 2 ? { state: "IN_PROGRESS", phase: "ROLLING" } : { ...final, phase: "DONE" };
        return c.json({
          group,
          revision: 5,
          previousRevision: 4,
          ...state,
          progress: { newInstances: 1, newHealthy: 1, oldInstances: 1, retired: 1 },
          instances: [{ id: `${group}-a`, node: "n1", state: "RUNNING", deploymentRevision: 5, role: "NEW", healthy: true, retired: false, playerCount: 0 }],
        });
      });
      for (const verb of ["pause", "resume", "promote", "rollback"])
        app.post(`/api/v1/groups/:group/deployments/:rev/${verb}`, async (c) =>
          c.json({ group: c.req.param("group"), revision: 5, state: verb === "pause" ? "PAUSED" : "IN_PROGRESS" }),
        );
    });
  });
  after(() => server.close());

  test("the flags become the create body; --no-health-gate, --template and --memory; a rolling restart sends {}", async () => {
    const { home, dispose } = homeWithContext(server.url);
    try {
      const [full, restart] = await Promise.all([
        runCli(
          [
            "deploy",
            "web",
            "--yes",
            "--strategy",
            "rolling",
            "--batch-size",
            "4",
            "--canary-percent",
            "25",
            "--no-health-gate",
            "--min-healthy",
            "30",
            "--auto-rollback",
            "--promotion-timeout",
            "120",
            "--template",
            "base",
            "--template",
            "plugins",
            "--memory",
            "2048",
          ],
          { home },
        ),
        runCli(["deploy", "lobby", "--yes", "--json"], { home }),
      ]);
      assert.equal(full.code, 0, full.stderr);
      assert.match(full.stdout, /revision 5/);
      assert.equal(restart.code, 0, restart.stderr);
      assert.equal(JSON.parse(restart.stdout).revision, 5);
      assert.deepEqual(bodiesOf(server, "POST", "/api/v1/groups/web/deployments"), [
        {
          strategy: "ROLLING",
          batchSize: 4,
          canaryPercent: 25,
          healthGate: false,
          minHealthySeconds: 30,
          autoRollback: true,
          promotionTimeoutSeconds: 120,
          changes: { templates: ["base", "plugins"], memoryMb: 2048 },
        },
      ]);
      assert.deepEqual(bodiesOf(server, "POST", "/api/v1/groups/lobby/deployments"), [{}]);
    } finally {
      dispose();
    }
  });

  test("out-of-bounds flags exit 1 and send nothing; 409 exits 1, 404 exits 4; No at the prompt cancels", async () => {
    const { home, dispose } = homeWithContext(server.url);
    try {
      const before = server.requests.length;
      const refused = await Promise.all([
        runCli(["deploy", "web", "--yes", "--batch-size", "0"], { home }),
        runCli(["deploy", "web", "--yes", "--canary-instances", "1", "--canary-percent", "10"], { home }),
        runCli(["deploy", "web", "--yes", "--canary-percent", "101"], { home }),
        runCli(["deploy", "web", "--yes", "--promotion-timeout", "0"], { home }),
        runCli(["deploy", "web", "--yes", "--batch-size", "-2"], { home }),
        runCli(["deploy", "web", "--yes", "--strategy", "sideways"], { home }),
        runCli(["deploy", "show", "web", "abc"], { home }),
        runCli(["deploy", "web"], { home, stdin: "n\n" }),
      ]);
      // A flag value of the wrong form (-2 for a count) is a usage error (64); a value out of bounds is refused (1).
      refused.slice(0, 7).forEach((r, i) => assert.equal(r.code, i === 4 ? 64 : 1, `case ${i}: ${r.stdout} ${r.stderr}`));
      assert.equal(refused[7].code, 6, "a confirmation nobody can answer (piped stdin, no --yes) exits 6");
      assert.equal(server.requests.length, before, "nothing was sent");
      const [busy, gone] = await Promise.all([runCli(["deploy", "busy", "--yes"], { home }), runCli(["deploy", "gone", "--yes"], { home })]);
      assert.equal(busy.code, 1, busy.stderr);
      assert.match(busy.stderr, /active deployment/);
      assert.equal(gone.code, 4, gone.stderr);
    } finally {
      dispose();
    }
  });

  test("list, show, pause, resume, promote and rollback --restore call their routes", async () => {
    const { home, dispose } = homeWithContext(server.url);
    try {
      const results = await Promise.all([
        runCli(["deploy", "list", "web"], { home }),
        runCli(["deploy", "show", "shown", "5"], { home }),
        runCli(["deploy", "pause", "web", "5"], { home }),
        runCli(["deploy", "resume", "web", "5"], { home }),
        runCli(["deploy", "promote", "web", "5"], { home }),
        runCli(["deploy", "rollback", "web", "5", "--restore"], { home }),
      ]);
      results.forEach((r, i) => assert.equal(r.code, 0, `command ${i}: ${r.stderr}`));
      assert.match(results[0].stdout, /REVISION/);
      assert.match(results[1].stdout, /shown-a/);
      assert.match(results[2].stdout, /PAUSED/);
      assert.deepEqual(bodiesOf(server, "POST", "/api/v1/groups/web/deployments/5/rollback"), [{ restore: true }]);
    } finally {
      dispose();
    }
  });

  test("--watch follows the deployment: exit 0 when it completed, 1 when it was rolled back", { timeout: 30_000 }, async () => {
    const { home, dispose } = homeWithContext(server.url);
    try {
      const [good, bad] = await Promise.all([
        runCli(["deploy", "good", "--yes", "--watch"], { home }),
        runCli(["deploy", "show", "bad", "5", "--watch"], { home }),
      ]);
      assert.equal(good.code, 0, good.stderr);
      assert.match(good.stdout, /COMPLETED/);
      assert.equal(bad.code, 1, bad.stderr);
      assert.match(bad.stderr, /ROLLED_BACK: health gate failed/);
    } finally {
      dispose();
    }
  });
});

// The audit pruner: records older than scheduler.auditRetentionDays go, newer ones stay; it prunes
// only while it holds the `audit-pruner` singleton lease; a controller holds that lease in its
// Raft cluster state once it runs.
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import { AUDIT_PRUNER_LEASE, startAuditPruner } from "../../src/audit/audit-pruner.js";
import { AuditService } from "../../src/audit/audit-service.js";
import { api, cleanupDirs, startGatewayController } from "../gateway/harness.js";
import { eventually } from "../support/wait.js";
import { openStoreFixture } from "../support/store-fixture.js";

const quiet = { name: "test", trace: () => undefined, debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };
const actor = { username: "admin", ipAddress: "127.0.0.1" };

describe("audit pruner", () => {
  after(() => cleanupDirs());

  it("deletes records older than the retention and keeps the rest", async () => {
    const f = await openStoreFixture("cloud-audit-prune-");
    try {
      const audit = new AuditService({ documents: f.store, clock: f.clock });
      await audit.record({ action: "group.create", resourceType: "group", resourceId: "old" }, actor);
      f.clock.advance(3 * 86_400_000);
      await audit.record({ action: "group.create", resourceType: "group", resourceId: "new" }, actor);
      f.clock.advance(86_400_000);
      assert.equal(await audit.prune(2), 1);
      const left = await f.store.collection("audit_log").find();
      assert.deepEqual(
        left.map((d) => d.resourceId),
        ["new"],
      );
      assert.equal(await audit.prune(2), 0, "nothing more to remove");
    } finally {
      await f.close();
    }
  });

  it("prunes only under the lease: skipped while another controller holds it", async () => {
    let prunes = 0;
    const audit = { prune: async () => (prunes++, 0) };
    const names: string[] = [];
    const skipped = startAuditPruner({ audit, retentionDays: 30, logger: quiet, runUnderLease: async (name) => (names.push(name), false) });
    await new Promise((r) => setTimeout(r, 20));
    skipped();
    assert.equal(prunes, 0);
    assert.deepEqual(names, [AUDIT_PRUNER_LEASE]);
    const held = startAuditPruner({ audit, retentionDays: 30, logger: quiet, runUnderLease: async (_name, _ttl, fn) => (await fn(), true) });
    await new Promise((r) => setTimeout(r, 20));
    held();
    assert.equal(prunes, 1);
  });

  it("a running controller holds the audit-pruner lease in its cluster state", { timeout: 60_000 }, async () => {
    const c = await startGatewayController();
    try {
      const lease = await eventually(async () => {
        const leases = (await api(c, "GET", "/api/v1/cluster/leases")).json as
          { leases?: { name: string; holder: string; fencingToken: number }[] } | { name: string }[];
        const list = Array.isArray(leases) ? leases : (leases.leases ?? []);
        return (list as { name: string; holder: string; fencingToken: number }[]).find((l) => l.name === AUDIT_PRUNER_LEASE);
      }, "audit-pruner lease");
      assert.ok(lease.fencingToken > 0, "the fencing token is a Raft log index");
    } finally {
      await c.stop();
    }
  });
});

import { after, before, beforeEach, describe, test } from "node:test";
import assert from "node:assert/strict";
import { InstanceService } from "../../src/domain/instances/instance-service.js";
import { defaultDrainOptions, NodeService } from "../../src/domain/nodes/node-service.js";
import { apiError } from "./assertions.js";
import { openFixture } from "./domain-fixtures.js";

type Fixture = Awaited<ReturnType<typeof openFixture>>;

describe("NodeService", () => {
  let fx: Fixture;
  let nodes: NodeService;
  let instances: InstanceService;

  before(async () => {
    fx = await openFixture();
    instances = new InstanceService(fx.store, fx.clock);
    nodes = new NodeService(fx.store, fx.events, fx.clock, instances);
    await nodes.upsert("node-a", { host: "10.0.0.1", totalMemoryMb: 16384, version: "0.1.0", labels: { zone: "eu" } });
    await nodes.upsert("node-b", { host: "10.0.0.2", state: "OFFLINE" });
    await nodes.upsert("node-c", { host: "10.0.0.3", state: "UNREACHABLE" });
    const base = { group: "lobby", port: 30000, playerCount: 0, memoryMb: 512, startedAt: null, deploymentRevision: 1 };
    await instances.save({ ...base, id: "i1", node: "node-a", state: "RUNNING" });
    await instances.save({ ...base, id: "i2", node: "node-a", state: "CRASHED" });
  });
  after(async () => fx.close());
  beforeEach(() => {
    fx.events.published.length = 0;
  });

  test("get returns the record with the live instance count", async () => {
    const node = await nodes.get("node-a");
    assert.equal(node.state, "ONLINE");
    assert.equal(node.host, "10.0.0.1");
    assert.equal(node.instanceCount, 1);
    assert.deepEqual(node.labels, { zone: "eu" });
    assert.equal(node.registeredAt, "2026-01-15T12:00:00.000Z");
    assert.equal(node.drainRequestedAt, null);
    await assert.rejects(nodes.get("ghost"), apiError(404, "NOT_FOUND", /^Node not found: ghost$/));
  });

  test("list filters by state", async () => {
    assert.deepEqual(
      (await nodes.list()).map((n) => n.id),
      ["node-a", "node-b", "node-c"],
    );
    assert.deepEqual(
      (await nodes.list("OFFLINE")).map((n) => n.id),
      ["node-b"],
    );
    assert.deepEqual(
      (await nodes.list("DRAINING")).map((n) => n.id),
      [],
    );
  });

  test("drain moves any state to DRAINING and publishes NODE_DRAIN_REQUESTED once", async () => {
    const { before: old, after: drained, changed } = await nodes.drain("node-b");
    assert.equal(old.state, "OFFLINE");
    assert.equal(drained.state, "DRAINING");
    assert.equal(changed, true);
    assert.deepEqual(fx.events.published, [
      {
        type: "NODE_DRAIN_REQUESTED",
        data: {
          nodeId: "node-b",
          shutdownAfterDrain: false,
          drainTimeoutSeconds: defaultDrainOptions.drainTimeoutSeconds,
          kickMessage: defaultDrainOptions.kickMessage,
          timestamp: "2026-01-15T12:00:00.000Z",
        },
      },
    ]);
    const again = await nodes.drain("node-b");
    assert.equal(again.changed, false);
    assert.equal(fx.events.published.length, 1, "draining a DRAINING node publishes nothing");
    assert.equal((await nodes.get("node-b")).state, "DRAINING");
  });

  test("undrain moves DRAINING to ONLINE and publishes NODE_DRAIN_COMPLETED", async () => {
    await nodes.drain("node-a");
    fx.events.published.length = 0;
    fx.clock.advance(2000);
    const { before: old, after: online } = await nodes.undrain("node-a");
    assert.equal(old.state, "DRAINING");
    assert.equal(online.state, "ONLINE");
    assert.equal(online.drainRequestedAt, null);
    assert.deepEqual(fx.events.published, [{ type: "NODE_DRAIN_COMPLETED", data: { nodeId: "node-a", timestamp: "2026-01-15T12:00:02.000Z" } }]);
  });

  test("undrain from any other state is 409 INVALID_STATE and changes nothing", async () => {
    for (const id of ["node-a", "node-c"]) {
      const state = (await nodes.get(id)).state;
      await assert.rejects(nodes.undrain(id), apiError(409, "INVALID_STATE", new RegExp(`^Node ${id} is not DRAINING \\(state: ${state}\\)$`)));
      assert.equal((await nodes.get(id)).state, state);
    }
    assert.deepEqual(fx.events.published, []);
    await assert.rejects(nodes.undrain("ghost"), apiError(404, "NOT_FOUND", /^Node not found: ghost$/));
    await assert.rejects(nodes.drain("ghost"), apiError(404, "NOT_FOUND", /^Node not found: ghost$/));
  });

  test("upsert keeps the registration time and stored fields not given", async () => {
    fx.clock.advance(60_000);
    const updated = await nodes.upsert("node-c", { host: "10.0.0.3", usedMemoryMb: 100, lastHeartbeatAt: "2026-01-15T12:01:00.000Z" });
    assert.equal(updated.registeredAt, "2026-01-15T12:00:00.000Z");
    assert.equal(updated.state, "UNREACHABLE");
    assert.equal(updated.usedMemoryMb, 100);
  });

  test("cordon sets the flag in any state and keeps the state; uncordon clears it; neither publishes", async () => {
    await nodes.upsert("cordon-1", { host: "10.0.1.1", state: "UNREACHABLE" });
    const cordoned = await nodes.cordon("cordon-1");
    assert.deepEqual([cordoned.before.cordoned, cordoned.after.cordoned, cordoned.after.state, cordoned.changed], [false, true, "UNREACHABLE", true]);
    const again = await nodes.cordon("cordon-1");
    assert.equal(again.changed, false, "cordoning a cordoned node changes nothing");
    assert.equal(again.after.cordoned, true);

    const uncordoned = await nodes.uncordon("cordon-1");
    assert.deepEqual([uncordoned.before.cordoned, uncordoned.after.cordoned, uncordoned.changed], [true, false, true]);
    assert.equal((await nodes.get("cordon-1")).cordoned, false);
    await assert.rejects(nodes.uncordon("cordon-1"), apiError(409, "INVALID_STATE", /^Node cordon-1 is not cordoned$/));
    await assert.rejects(nodes.cordon("ghost"), apiError(404, "NOT_FOUND", /^Node not found: ghost$/));
    await assert.rejects(nodes.uncordon("ghost"), apiError(404, "NOT_FOUND", /^Node not found: ghost$/));
    assert.deepEqual(fx.events.published, []);
  });

  test("cordon and drain are independent", async () => {
    await nodes.upsert("cordon-2", { host: "10.0.1.2" });
    await nodes.cordon("cordon-2");
    const drained = await nodes.drain("cordon-2");
    assert.deepEqual([drained.after.state, drained.after.cordoned], ["DRAINING", true]);
    const undrained = await nodes.undrain("cordon-2");
    assert.deepEqual([undrained.after.state, undrained.after.cordoned], ["ONLINE", true]);
    const uncordoned = await nodes.uncordon("cordon-2");
    assert.deepEqual([uncordoned.after.state, uncordoned.after.cordoned], ["ONLINE", false]);
  });

  test("delete is refused while ONLINE or DRAINING, and while instances are live unless forced", async () => {
    await nodes.upsert("del-online", { host: "10.0.2.1" });
    await nodes.upsert("del-draining", { host: "10.0.2.2", state: "DRAINING" });
    await nodes.upsert("del-busy", { host: "10.0.2.3", state: "UNREACHABLE" });
    await nodes.upsert("del-idle", { host: "10.0.2.4", state: "OFFLINE" });
    const base = { group: "lobby", port: 30001, playerCount: 0, memoryMb: 512, startedAt: null, deploymentRevision: 1 };
    await instances.save({ ...base, id: "busy-1", node: "del-busy", state: "RUNNING" });
    await instances.save({ ...base, id: "busy-2", node: "del-busy", state: "STARTING" });

    for (const [id, state] of [
      ["del-online", "ONLINE"],
      ["del-draining", "DRAINING"],
    ]) {
      await assert.rejects(
        nodes.delete(id, { force: true }),
        apiError(409, "INVALID_STATE", new RegExp(`^Node ${id} is ${state}: only an UNREACHABLE or OFFLINE node can be deleted`)),
      );
      assert.equal((await nodes.get(id)).state, state);
    }
    await assert.rejects(nodes.delete("del-busy"), apiError(409, "CONFLICT", /^Node del-busy has 2 live instances; pass force=true to delete it anyway$/));
    const forced = await nodes.delete("del-busy", { force: true });
    assert.equal(forced.instanceCount, 2);
    assert.equal((await instances.get("busy-1")).node, "del-busy", "instance records are left as they are");

    const removed = await nodes.delete("del-idle");
    assert.deepEqual([removed.id, removed.state, removed.instanceCount], ["del-idle", "OFFLINE", 0]);
    await assert.rejects(nodes.get("del-idle"), apiError(404, "NOT_FOUND", /^Node not found: del-idle$/));
    await assert.rejects(nodes.delete("del-idle"), apiError(404, "NOT_FOUND", /^Node not found: del-idle$/));
    assert.ok(!(await nodes.list()).some((n) => n.id === "del-idle" || n.id === "del-busy"));
    assert.deepEqual(fx.events.published, []);
  });

  test("revoke stores the revocation, tells the node's listeners after storing it, and keeps the first time", async () => {
    await nodes.upsert("cert-1", { host: "10.0.3.1" });
    await nodes.upsert("cert-2", { host: "10.0.3.2" });
    const told: string[] = [];
    let readInListener: Promise<boolean> | null = null;
    const stop1 = nodes.onCertificateRevoked("cert-1", () => {
      told.push("cert-1");
      readInListener ??= nodes.isCertificateRevoked("cert-1");
    });
    const stop2 = nodes.onCertificateRevoked("cert-2", () => told.push("cert-2"));

    assert.equal(await nodes.isCertificateRevoked("cert-1"), false);
    fx.clock.advance(1_000);
    const revokedAtIso = new Date(fx.clock.nowMs()).toISOString();
    const revoked = await nodes.revokeCertificate("cert-1");
    assert.deepEqual(
      [revoked.before.certificateRevoked, revoked.before.certificateRevokedAt, revoked.after.certificateRevoked, revoked.after.certificateRevokedAt],
      [false, null, true, revokedAtIso],
    );
    assert.equal(revoked.changed, true);
    assert.equal(revoked.after.state, "ONLINE", "revocation is not a state");
    assert.deepEqual(told, ["cert-1"]);
    assert.equal(await readInListener, true, "a listener finds the revocation stored");
    assert.equal(await nodes.isCertificateRevoked("cert-1"), true);
    assert.equal((await nodes.get("cert-1")).certificateRevokedAt, revokedAtIso);
    const listed = (await nodes.list()).find((n) => n.id === "cert-1")!;
    assert.deepEqual([listed.certificateRevoked, listed.certificateRevokedAt], [true, revokedAtIso]);
    assert.equal((await nodes.get("cert-2")).certificateRevoked, false);

    fx.clock.advance(1_000);
    const again = await nodes.revokeCertificate("cert-1");
    assert.equal(again.changed, false);
    assert.equal(again.after.certificateRevokedAt, revokedAtIso);

    stop1();
    stop2();
    await nodes.revokeCertificate("cert-2");
    assert.deepEqual(told, ["cert-1", "cert-1"], "stopped listeners are not told");
    await assert.rejects(nodes.revokeCertificate("ghost"), apiError(404, "NOT_FOUND", /^Node not found: ghost$/));
    assert.deepEqual(fx.events.published, []);
  });

  test("unrevoke lifts the revocation; not revoked is 409 INVALID_STATE", async () => {
    const lifted = await nodes.unrevokeCertificate("cert-1");
    assert.deepEqual([lifted.before.certificateRevoked, lifted.after.certificateRevoked, lifted.after.certificateRevokedAt], [true, false, null]);
    assert.equal(await nodes.isCertificateRevoked("cert-1"), false);
    await assert.rejects(nodes.unrevokeCertificate("cert-1"), apiError(409, "INVALID_STATE", /^The certificate of node cert-1 is not revoked$/));
    await assert.rejects(nodes.unrevokeCertificate("ghost"), apiError(404, "NOT_FOUND", /^Node not found: ghost$/));
  });

  test("a revocation outlives the deletion of the node record", async () => {
    await nodes.upsert("cert-3", { host: "10.0.3.3", state: "OFFLINE" });
    await nodes.revokeCertificate("cert-3");
    const removed = await nodes.delete("cert-3");
    assert.equal(removed.certificateRevoked, true);
    assert.equal(await nodes.isCertificateRevoked("cert-3"), true);
    // The daemon of a deleted node that comes back still finds its certificate revoked.
    const recreated = await nodes.upsert("cert-3", { host: "10.0.3.3" });
    assert.equal(recreated.certificateRevoked, true);
  });
});

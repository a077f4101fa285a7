/**
 * Machine credentials end when they should (docs/decisions/plugin-api.md, "Machine credentials"),
 * over a real server on a fake clock:
 * - revoking a workload token revokes its refresh family: a token refreshed from it stops at once,
 *   cannot refresh itself, and does not come back once the revoked ancestor has expired;
 * - a STATIC slot keeps its instance id, so its record names the current start: tokens of an
 *   earlier start of the slot are refused;
 * - node credentials (`nd.`) die with the node (DELETE) and with its certificate's revocation, at
 *   once, and stay dead when the node registers again or the revocation is lifted.
 * Durability over a lost key-value store: workload-credentials-durable.test.ts.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { FakeClock } from "../../support/fake-clock.js";
import { ADMIN_PASSWORD, startTestApp, type TestApp, type TestResponse } from "../../support/http-app.js";
import type { InstanceFields } from "../../../src/domain/instances/instance-service.js";
import { MachineCredentials } from "../../../src/plugin-api/credentials.js";

const HOUR_MS = 60 * 60 * 1000;

/** An instance record as the scheduler writes it (with the id of its current start). */
function record(id: string, group: string, startId: string): InstanceFields & { startId: string } {
  return { id, group, node: "n1", port: 30000, memoryMb: 512, state: "RUNNING", playerCount: 0, startedAt: null, deploymentRevision: 1, startId };
}

describe("workload token families and starts", () => {
  let t: TestApp;
  const clock = new FakeClock(Date.parse("2026-03-01T12:00:00Z"));
  const admin = () => t.login("admin", ADMIN_PASSWORD);

  const players = (token: string): Promise<TestResponse> => t.request("GET", "/api/plugin/players", { token });
  const refresh = async (token: string): Promise<string> => {
    const res = await t.request("POST", "/api/plugin/auth/refresh", { token });
    assert.equal(res.status, 200, res.text);
    return res.json.token as string;
  };

  before(async () => {
    t = await startTestApp({ clock });
    await t.groups.create({ name: "lobby", platform: "paper" });
    await t.groups.create({ name: "hub", platform: "paper", scalingMode: "STATIC", minInstances: 1 });
    await t.nodes.upsert("n1", { host: "10.0.0.1" });
  });
  after(() => t.close());

  it("revoking a token revokes its refresh family, and a refreshed token never outlives the revocation", async () => {
    await t.instances.save(record("lobby-1", "lobby", "start-a"));
    // The first token was issued by the same cluster almost a day ago: it expires in 10 s.
    const past = new FakeClock(clock.nowMs() - 24 * HOUR_MS + 10_000);
    const earlier = await MachineCredentials.open({ documents: t.documents, clock: past, instances: t.instances, nodes: t.nodes });
    const first = earlier.issueWorkloadToken({ instanceId: "lobby-1", group: "lobby", node: "n1" }, "start-a").token;
    const unrelated = t.credentials.issueWorkloadToken({ instanceId: "lobby-1", group: "lobby", node: "n1" }, "start-a").token;
    const second = await refresh(first);
    const third = await refresh(second);
    assert.equal((await players(third)).status, 200);

    const revoked = await t.request("POST", "/api/v1/workload-credentials/revoke", { token: await admin(), body: { token: first } });
    assert.equal(revoked.status, 200, revoked.text);
    for (const [name, token] of [
      ["the revoked token", first],
      ["its child", second],
      ["its grandchild", third],
    ] as const) {
      assert.equal((await players(token)).status, 401, `${name} is refused at once`);
    }
    assert.equal((await t.request("POST", "/api/plugin/auth/refresh", { token: third })).status, 401, "a descendant cannot refresh itself");
    assert.equal((await players(unrelated)).status, 200, "a token of another dispatch of the start is its own family");

    // The revoked ancestor has expired; its descendants were issued later and have not.
    clock.advance(11_000);
    assert.equal((await players(first)).status, 401);
    assert.equal((await players(third)).status, 401, "the grandchild stays refused after its ancestor expired");
  });

  it("a token of an earlier start of a STATIC slot is refused once the slot started again", async () => {
    await t.instances.save(record("hub-1", "hub", "start-1"));
    const earlier = t.credentials.issueWorkloadToken({ instanceId: "hub-1", group: "hub", node: "n1" }, "start-1").token;
    const earlierRefreshed = await refresh(earlier);
    assert.equal((await players(earlier)).status, 200);

    // The slot finished and started again under its id: the scheduler wrote a new record.
    await t.instances.save({ ...record("hub-1", "hub", "start-1"), state: "CRASHED" });
    await t.instances.save({ ...record("hub-1", "hub", "start-2"), state: "STARTING" });
    const current = t.credentials.issueWorkloadToken({ instanceId: "hub-1", group: "hub", node: "n1" }, "start-2").token;
    assert.equal((await players(current)).status, 200, "the current start's token works");
    assert.equal((await players(earlier)).status, 401, "the earlier start's token is refused");
    assert.equal((await players(earlierRefreshed)).status, 401, "so is its refreshed token");
    assert.equal((await t.request("POST", "/api/plugin/auth/refresh", { token: earlier })).status, 401);
  });

  it("revoking an instance's tokens ends its current start's tokens; its next start works", async () => {
    await t.instances.save(record("hub-2", "hub", "start-x"));
    const token = t.credentials.issueWorkloadToken({ instanceId: "hub-2", group: "hub", node: "n1" }, "start-x").token;
    const refreshed = await refresh(token);
    const res = await t.request("POST", "/api/v1/services/hub-2/workload-credentials/revoke", { token: await admin() });
    assert.equal(res.status, 200, res.text);
    assert.equal((await players(token)).status, 401);
    assert.equal((await players(refreshed)).status, 401);
    // A dispatch of the same start after the revocation gets nothing that works either.
    clock.advance(1_000);
    const redispatched = t.credentials.issueWorkloadToken({ instanceId: "hub-2", group: "hub", node: "n1" }, "start-x").token;
    assert.equal((await players(redispatched)).status, 401);
    await t.instances.save(record("hub-2", "hub", "start-y"));
    const next = t.credentials.issueWorkloadToken({ instanceId: "hub-2", group: "hub", node: "n1" }, "start-y").token;
    assert.equal((await players(next)).status, 200, "the next start's token works");
  });
});

describe("node credentials", () => {
  let t: TestApp;
  const clock = new FakeClock(Date.parse("2026-03-01T12:00:00Z"));
  let admin: string;

  const templates = (token: string): Promise<TestResponse> => t.request("GET", "/api/v1/templates", { token });

  before(async () => {
    t = await startTestApp({ clock });
    admin = await t.tokenFor("ADMIN");
  });
  after(() => t.close());

  it("die with the node: DELETE refuses them at once, and a node registering again under the id does not revive them", async () => {
    await t.nodes.upsert("gone", { host: "10.0.0.2", state: "OFFLINE" });
    const credential = t.credentials.issueNodeCredential("gone").token;
    assert.equal((await templates(credential)).status, 200);
    const deleted = await t.request("DELETE", "/api/v1/nodes/gone", { token: admin });
    assert.equal(deleted.status, 204, deleted.text);
    assert.equal((await templates(credential)).status, 401, "refused at once, not 24 h later");

    clock.advance(1_000);
    await t.nodes.upsert("gone", { host: "10.0.0.2", state: "ONLINE" });
    assert.equal((await templates(credential)).status, 401, "the old credential stays refused");
    assert.equal((await templates(t.credentials.issueNodeCredential("gone").token)).status, 200, "the new registration's credential works");
  });

  it("die with the certificate: a revocation refuses them at once, and lifting it does not revive them", async () => {
    await t.nodes.upsert("revoked", { host: "10.0.0.3", state: "ONLINE" });
    const credential = t.credentials.issueNodeCredential("revoked").token;
    assert.equal((await templates(credential)).status, 200);
    const revoked = await t.request("POST", "/api/v1/nodes/revoked/revoke-cert", { token: admin });
    assert.equal(revoked.status, 200, revoked.text);
    assert.equal((await templates(credential)).status, 401, "refused at once");
    clock.advance(1_000);
    assert.equal((await templates(t.credentials.issueNodeCredential("revoked").token)).status, 401, "no credential of a revoked node works");

    const lifted = await t.request("POST", "/api/v1/nodes/revoked/unrevoke-cert", { token: admin });
    assert.equal(lifted.status, 200, lifted.text);
    assert.equal((await templates(credential)).status, 401, "the credential of before the revocation stays refused");
    clock.advance(1_000);
    assert.equal((await templates(t.credentials.issueNodeCredential("revoked").token)).status, 200, "one issued after it works");
  });
});

/**
 * `DELETE /api/v1/services/{id}` on a real controller: a finished instance's record goes (204,
 * audited as instance.delete with the record before), a live one stays (409
 * INSTANCE_NOT_FINISHED), a STATIC group's slot record stays (409 STATIC_SLOT) while a finished
 * non-slot record of a STATIC group goes, an unknown id is 404, and a VIEWER may not.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { InstanceState } from "../../../src/domain/instances/instance-schemas.js";
import { startTestApp, type TestApp } from "../../support/http-app.js";

describe("DELETE /api/v1/services/{id}", () => {
  let t: TestApp;
  const save = (id: string, group: string, state: InstanceState) =>
    t.instances.save({ id, group, node: "n1", port: 30000, memoryMb: 512, state, playerCount: 0, startedAt: null, stoppedAt: null, deploymentRevision: 1 });
  before(async () => {
    t = await startTestApp();
    await t.groups.create({ name: "lobby", platform: "paper" });
    await t.groups.create({ name: "arena", platform: "paper", scalingMode: "STATIC", minInstances: 2, maxInstances: 2 });
    await save("lobby-a1b2", "lobby", "STOPPED");
    await save("lobby-c3d4", "lobby", "CRASHED");
    await save("lobby-e5f6", "lobby", "RUNNING");
    await save("arena-1", "arena", "STOPPED");
    await save("arena-old", "arena", "STOPPED");
  });
  after(() => t.close());

  it("deletes finished records only, keeps STATIC slots, audits the delete", async () => {
    const token = await t.tokenFor("OPERATOR");
    const del = (id: string, as = token) => t.request("DELETE", `/api/v1/services/${id}`, { token: as });
    assert.equal((await del("lobby-a1b2", await t.tokenFor("VIEWER"))).status, 403);
    assert.equal((await del("lobby-a1b2")).status, 204);
    assert.equal((await del("lobby-c3d4")).status, 204);
    assert.equal(await t.instances.getDoc("lobby-a1b2"), null);
    assert.equal(await t.instances.getDoc("lobby-c3d4"), null);
    const live = await del("lobby-e5f6");
    assert.equal(live.status, 409, live.text);
    assert.equal(live.json.error.code, "INSTANCE_NOT_FINISHED");
    const slot = await del("arena-1");
    assert.equal(slot.status, 409, slot.text);
    assert.equal(slot.json.error.code, "STATIC_SLOT");
    assert.ok(await t.instances.getDoc("arena-1"), "the slot record stays");
    assert.equal((await del("arena-old")).status, 204, "not a slot id");
    const unknown = await del("lobby-a1b2");
    assert.equal(unknown.status, 404);
    assert.equal(unknown.json.error.code, "NOT_FOUND");

    const audits = (await t.audit.keyset({ cursor: "", pageSize: 10 })).data.filter((entry) => entry.action === "instance.delete");
    assert.deepEqual(audits.map((entry) => entry.resourceId).sort(), ["arena-old", "lobby-a1b2", "lobby-c3d4"]);
    const first = audits.find((entry) => entry.resourceId === "lobby-a1b2")!;
    assert.equal(JSON.parse(first.before!).state, "STOPPED");
    assert.equal(first.username, "operator-user");
  });
});

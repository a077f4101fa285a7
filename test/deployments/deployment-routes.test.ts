// The deployment routes on the real HTTP app (the reconciler is not running here: what is checked is
// what the routes themselves decide). Bad input gets the error envelope and changes nothing: an
// unknown group or revision, exclusive canary settings, sizes out of range, an unknown template, a
// second active deployment. Then the operator's controls: pause, resume, promote, rollback.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { CloudEvent } from "../../src/events/types.js";
import { startTestApp, type TestApp } from "../support/http-app.js";

describe("deployment routes", () => {
  let t: TestApp;
  let admin: string;
  let viewer: string;
  const seen: CloudEvent[] = [];
  const base = "/api/v1/groups/lobby/deployments";

  before(async () => {
    t = await startTestApp();
    admin = await t.tokenFor("ADMIN");
    viewer = await t.tokenFor("VIEWER");
    t.events.subscribeAll((event) => void seen.push(event));
    assert.equal((await t.request("POST", "/api/v1/templates", { token: admin, body: { name: "plugins" } })).status, 201);
    const group = await t.request("POST", "/api/v1/groups", { token: admin, body: { name: "lobby", platform: "simulated", templates: [], memoryMb: 256 } });
    assert.equal(group.status, 201);
  });
  after(async () => t.close());

  const list = async () => (await t.request("GET", base, { token: viewer })).json as { revision: number; state: string }[];

  test("bad input gets the envelope and changes nothing", async () => {
    const cases: [string, unknown, number, string][] = [
      ["/api/v1/groups/nope/deployments", {}, 404, "NOT_FOUND"],
      [base, { canaryInstances: 1, canaryPercent: 10 }, 422, "VALIDATION_ERROR"],
      [base, { batchSize: 0 }, 422, "VALIDATION_ERROR"],
      [base, { batchSize: -3 }, 422, "VALIDATION_ERROR"],
      [base, { canaryInstances: -1 }, 422, "VALIDATION_ERROR"],
      [base, { canaryPercent: 101 }, 422, "VALIDATION_ERROR"],
      [base, { promotionTimeoutSeconds: 0 }, 422, "VALIDATION_ERROR"],
      [base, { strategy: "SIDEWAYS" }, 422, "VALIDATION_ERROR"],
      [base, { changes: { templates: ["missing"] } }, 422, "VALIDATION_ERROR"],
      [base, { changes: { platform: "paper" } }, 422, "VALIDATION_ERROR"],
      [base, { unknown: true }, 422, "VALIDATION_ERROR"],
    ];
    for (const [path, body, status, code] of cases) {
      const res = await t.request("POST", path, { token: admin, body });
      assert.equal(res.status, status, `${path} ${JSON.stringify(body)}: ${JSON.stringify(res.json)}`);
      assert.equal(res.json.error.code, code);
      assert.equal(res.json.error.status, status);
      assert.equal(typeof res.json.error.message, "string");
    }
    assert.equal((await t.request("POST", base, { token: viewer, body: {} })).status, 403, "a viewer cannot deploy");
    assert.deepEqual(await list(), [], "nothing was recorded");
    assert.equal((await t.request("GET", `${base}/1`, { token: viewer })).status, 404);
    assert.equal((await t.request("GET", `${base}/abc`, { token: viewer })).status, 422);
    assert.equal(seen.filter((e) => e.type === "DEPLOYMENT_CREATED").length, 0);
  });

  test("create freezes a revision pinned to the template hash, publishes DEPLOYMENT_CREATED, is audited; a second is 409", async () => {
    await t.request("PUT", "/api/v1/templates/plugins/files/content", { token: admin, body: { path: "a.txt", content: "v1" } });
    const hash = (await t.request("GET", "/api/v1/templates/plugins", { token: admin })).json.hash;
    const res = await t.request("POST", base, { token: admin, body: { changes: { templates: ["plugins"], memoryMb: 512 }, canaryPercent: 50, batchSize: 2 } });
    assert.equal(res.status, 201, JSON.stringify(res.json));
    assert.equal(res.json.revision, 1);
    assert.equal(res.json.state, "IN_PROGRESS");
    assert.deepEqual(res.json.revisionRecord.templates, [{ name: "plugins", hash }]);
    assert.equal(res.json.revisionRecord.memoryMb, 512);
    assert.deepEqual(res.json.settings, {
      strategy: "ROLLING",
      batchSize: 2,
      canaryInstances: null,
      canaryPercent: 50,
      healthGate: true,
      minHealthySeconds: 10,
      autoRollback: false,
      promotionTimeoutSeconds: null,
      maxSurge: 1,
      maxUnavailable: 0,
    });
    const group = (await t.request("GET", "/api/v1/groups/lobby", { token: viewer })).json;
    assert.deepEqual([group.templates, group.memoryMb], [["plugins"], 512], "the group record says what its instances start from");
    assert.deepEqual(
      seen.filter((e) => e.type === "DEPLOYMENT_CREATED").map((e) => e.data),
      [{ groupName: "lobby", revision: 1, strategy: "ROLLING" }],
    );
    const audit = (await t.audit.keyset({ cursor: "", pageSize: 1 })).data[0];
    assert.equal(audit.action, "deployment.create");
    assert.equal(audit.resourceId, "lobby");

    // A template edit after the freeze does not change the revision.
    await t.request("PUT", "/api/v1/templates/plugins/files/content", { token: admin, body: { path: "a.txt", content: "v2" } });
    assert.deepEqual((await t.request("GET", `${base}/1`, { token: viewer })).json.revisionRecord.templates, [{ name: "plugins", hash }]);

    const second = await t.request("POST", base, { token: admin, body: {} });
    assert.equal(second.status, 409);
    assert.equal(second.json.error.code, "DEPLOYMENT_ACTIVE");
    assert.equal((await list()).length, 1, "the refused one left nothing behind");
  });

  test("pause, resume, promote and rollback move the operator's state; a finished deployment refuses them", async () => {
    assert.equal((await t.request("POST", `${base}/1/pause`, { token: admin })).json.state, "PAUSED");
    assert.equal((await t.request("POST", `${base}/1/pause`, { token: admin })).json.state, "PAUSED", "pausing twice changes nothing");
    assert.equal((await t.request("POST", `${base}/1/resume`, { token: admin })).json.state, "IN_PROGRESS");
    assert.equal((await t.request("POST", `${base}/1/promote`, { token: admin })).json.promoted, true);
    assert.equal((await t.request("POST", `${base}/1/pause`, { token: viewer })).status, 403);
    assert.equal((await t.request("POST", `${base}/1/rollback`, { token: admin, body: { restore: "yes" } })).status, 422);
    const rolled = await t.request("POST", `${base}/1/rollback`, { token: admin, body: {} });
    assert.equal(rolled.status, 200);
    assert.equal(rolled.json.state, "ROLLED_BACK");
    const again = await t.request("POST", `${base}/1/resume`, { token: admin });
    assert.equal(again.status, 409);
    assert.equal(again.json.error.code, "DEPLOYMENT_FINISHED");
    const actions = (await t.audit.keyset({ cursor: "", pageSize: 10 })).data.map((a: { action: string }) => a.action);
    for (const action of ["deployment.pause", "deployment.resume", "deployment.promote", "deployment.rollback"]) assert.ok(actions.includes(action), action);
  });

  test("promote without a canary is 409 NO_CANARY", async () => {
    await t.request("POST", "/api/v1/groups", { token: admin, body: { name: "plain", platform: "simulated" } });
    const res = await t.request("POST", "/api/v1/groups/plain/deployments", { token: admin, body: {} });
    assert.equal(res.status, 201);
    const promoted = await t.request("POST", "/api/v1/groups/plain/deployments/1/promote", { token: admin });
    assert.equal(promoted.status, 409);
    assert.equal(promoted.json.error.code, "NO_CANARY");
  });
});

// The deployment health gate and metrics: when the group's platform reports metrics (an instance of
// an older revision has a current report), a new instance counts as healthy only once it has
// reported since it became RUNNING, besides serving minHealthySeconds without a crash. A platform
// that reports nothing is gated on time and crashes alone. The reconciler runs one step at a time
// on a fake clock against the real stores of a test app.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { DeploymentReconciler } from "../../src/deployments/deployment-reconciler.js";
import type { DeploymentCollections } from "../../src/deployments/deployment-store.js";
import { FakeClock } from "../support/fake-clock.js";
import { startTestApp, type TestApp } from "../support/http-app.js";
import { instanceRecord } from "../scheduler/support.js";
import { handSteppedReconciler } from "./reconciler-fixture.js";

describe("deployment health gate with reported metrics", () => {
  const clock = new FakeClock(Date.parse("2026-06-01T12:00:00Z"));
  let t: TestApp;
  let admin: string;
  let collections: DeploymentCollections;
  let reconciler: DeploymentReconciler;
  /** Report times (epoch ms) the reconciler sees, by instance id. */
  const reports = new Map<string, number>();

  before(async () => {
    t = await startTestApp({ clock });
    admin = await t.tokenFor("ADMIN");
    ({ reconciler, collections } = handSteppedReconciler(t, clock, {
      metricsReportedAtMs: async (ids) => new Map(ids.filter((id) => reports.has(id)).map((id) => [id, reports.get(id)!])),
    }));
  });
  after(async () => t.close());

  /** A group with one RUNNING instance of its first revision, a rolling restart of it, and the new revision's instance RUNNING. */
  const rollingRestart = async (group: string) => {
    assert.equal((await t.request("POST", "/api/v1/groups", { token: admin, body: { name: group, platform: "simulated", memoryMb: 256 } })).status, 201);
    await t.instances.save(instanceRecord({ id: `${group}-old`, group, node: "node-a", state: "RUNNING" }));
    const created = await t.request("POST", `/api/v1/groups/${group}/deployments`, { token: admin, body: { minHealthySeconds: 10 } });
    assert.equal(created.status, 201, created.text);
    const revision = created.json.revision as number;
    await t.instances.save({ ...instanceRecord({ id: `${group}-new`, group, node: "node-a", state: "RUNNING" }), deploymentRevision: revision });
    return { id: `${group}:${revision}`, newId: `${group}-new` };
  };
  const healthy = async (id: string, instanceId: string) => (await collections.progress.get(id))?.instances[instanceId]?.healthy === true;

  it("waits for a report from the new instance when the old one reports, then counts it healthy", async () => {
    const { id, newId } = await rollingRestart("metered");
    reports.set("metered-old", clock.nowMs());
    await reconciler.stepAll(); // the new instance is seen RUNNING from now
    clock.advance(11_000);
    await reconciler.stepAll();
    assert.equal(await healthy(id, newId), false, "serving 11 s is not enough without a report");
    reports.set(newId, clock.nowMs());
    await reconciler.stepAll();
    assert.equal(await healthy(id, newId), true, "healthy once it reported");
  });

  it("gates on time alone when no instance of the group reports metrics", async () => {
    const { id, newId } = await rollingRestart("silent");
    await reconciler.stepAll();
    clock.advance(5_000);
    await reconciler.stepAll();
    assert.equal(await healthy(id, newId), false, "5 s of 10");
    clock.advance(6_000);
    await reconciler.stepAll();
    assert.equal(await healthy(id, newId), true);
  });
});

// The deployment reconciler's writes are fenced by its singleton lease: each write is preceded by
// a confirmation of the lease through Raft (a lost lease writes nothing), and a progress document
// written under a newer fencing token is never overwritten by a holder with an older one (a
// controller cut off after it lost the lease). Steps are taken by hand on a fake clock against
// the real stores of a test app.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { DeploymentReconciler, ReconcilerLease } from "../../src/deployments/deployment-reconciler.js";
import type { DeploymentCollections } from "../../src/deployments/deployment-store.js";
import { FakeClock } from "../support/fake-clock.js";
import { startTestApp, type TestApp } from "../support/http-app.js";
import { instanceRecord } from "../scheduler/support.js";
import { handSteppedReconciler } from "./reconciler-fixture.js";

describe("deployment reconciler fencing", () => {
  const clock = new FakeClock(Date.parse("2026-06-01T12:00:00Z"));
  let t: TestApp;
  let admin: string;
  let collections: DeploymentCollections;
  let reconciler: DeploymentReconciler;

  /**
   * A lease with `fencingToken` whose confirmation succeeds while `held()` says so, and counts its
   * calls; `duringConfirm` runs inside the first confirmation (what happens while the holder stalls).
   */
  const leaseOf = (fencingToken: number, held: () => boolean = () => true, duringConfirm?: () => Promise<void>) => {
    const lease = {
      signal: new AbortController().signal,
      fencingToken,
      confirmations: 0,
      async confirm() {
        lease.confirmations++;
        if (lease.confirmations === 1) await duringConfirm?.();
        if (!held()) throw new Error("lease lost");
      },
    };
    return lease satisfies ReconcilerLease;
  };

  before(async () => {
    t = await startTestApp({ clock });
    admin = await t.tokenFor("ADMIN");
    ({ reconciler, collections } = handSteppedReconciler(t, clock));
  });
  after(async () => t.close());

  const rollingRestart = async (group: string) => {
    assert.equal((await t.request("POST", "/api/v1/groups", { token: admin, body: { name: group, platform: "simulated", memoryMb: 256 } })).status, 201);
    await t.instances.save(instanceRecord({ id: `${group}-old`, group, node: "node-a", state: "RUNNING" }));
    const created = await t.request("POST", `/api/v1/groups/${group}/deployments`, { token: admin, body: { minHealthySeconds: 10 } });
    assert.equal(created.status, 201, created.text);
    const revision = created.json.revision as number;
    return { id: `${group}:${revision}`, revision };
  };

  it("stamps the progress with its fencing token after confirming the lease; a lost lease writes nothing", async () => {
    const { id } = await rollingRestart("fenced");
    const lost = leaseOf(3, () => false);
    await reconciler.stepAll(lost);
    assert.equal(lost.confirmations, 1);
    assert.equal(await collections.progress.get(id), null, "nothing written without the lease");

    const held = leaseOf(3);
    await reconciler.stepAll(held);
    const progress = await collections.progress.get(id);
    assert.ok(progress?.intent, "the first step wrote an intent");
    assert.equal(progress.fencingToken, 3);
    assert.ok(held.confirmations >= 1);
  });

  it("a holder with an older token never overwrites progress written under a newer one", async () => {
    const { id, revision } = await rollingRestart("cutoff");
    await reconciler.stepAll(leaseOf(9));
    const newer = await collections.progress.get(id);
    assert.equal(newer?.fencingToken, 9);
    // The new instance runs: the next step would record its health clock.
    await t.instances.save({ ...instanceRecord({ id: "cutoff-new", group: "cutoff", node: "node-a", state: "RUNNING" }), deploymentRevision: revision });
    clock.advance(1_000);
    // A controller that believes it holds the lease with token 4 stalls in its confirmation; meanwhile the holder with token 12 writes.
    let written: unknown = null;
    const newerHolder = async () => {
      await reconciler.stepAll(leaseOf(12));
      written = await collections.progress.get(id);
    };
    await reconciler.stepAll(leaseOf(4, () => true, newerHolder));
    assert.equal((written as { fencingToken?: number } | null)?.fencingToken, 12);
    assert.deepEqual(await collections.progress.get(id), written, "the stale holder's step was dropped");
    const after = await collections.progress.get(id);
    assert.ok(after?.instances["cutoff-new"]?.runningSince, "the current holder's step is written");
    assert.notDeepEqual(newer, after);
  });

  it("tokens of an earlier Raft history already on the progress do not stop a holder whose lease is confirmed", async () => {
    const { id } = await rollingRestart("history");
    await reconciler.stepAll(leaseOf(900));
    assert.equal((await collections.progress.get(id))?.fencingToken, 900);
    // A restore into a new cluster: its grants start low again. Nobody else writes meanwhile.
    await t.instances.save({ ...instanceRecord({ id: "history-extra", group: "history", node: "node-a", state: "RUNNING" }), deploymentRevision: 0 });
    clock.advance(1_000);
    const restarted = leaseOf(3);
    await reconciler.stepAll(restarted);
    assert.equal((await collections.progress.get(id))?.fencingToken, 3, "the confirmed holder writes and stamps its own token");
  });
});

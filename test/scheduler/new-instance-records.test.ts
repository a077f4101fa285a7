// New instance records are fenced in three steps (check, insert, check again) over the real
// instance service on the embedded store: an owner that lost its scope while it wrote withdraws
// what it wrote, except a record the new owner has claimed meanwhile; a STATIC slot's finished
// record is replaced at its revision and put back on withdrawal; a live record under the id is
// never overwritten.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { recordNewInstances } from "../../src/scheduler/new-instance-records.js";
import { ScopeLostError } from "../../src/scheduler/scopes.js";
import { RevisionConflictError } from "../../src/store/ports.js";
import { instanceRecord, openSchedulerFixture, type SchedulerFixture } from "./support.js";

describe("new instance records", () => {
  let fx: SchedulerFixture;
  before(async () => {
    fx = await openSchedulerFixture("cloud-new-records-");
  });
  after(() => fx.close());

  const scheduled = (id: string) => instanceRecord({ id, group: "lobby", node: "node-a", state: "SCHEDULED" });

  test("written when the scope holds before and after", async () => {
    let checks = 0;
    await recordNewInstances(fx.instances, [scheduled("lobby-a1"), scheduled("lobby-a2")], async () => void checks++);
    assert.equal(checks, 2);
    assert.deepEqual(
      (await fx.instances.findDocs({ group: "lobby" })).map((d) => d.id).filter((id) => id.startsWith("lobby-a")),
      ["lobby-a1", "lobby-a2"],
    );
  });

  test("the scope moved while they were written: withdrawn, except one the new owner claimed meanwhile", async () => {
    let checks = 0;
    const claimed = "lobby-b2";
    const kept = new Set<string>();
    await assert.rejects(
      recordNewInstances(
        fx.instances,
        [scheduled("lobby-b1"), scheduled(claimed), scheduled("lobby-b3")],
        async () => {
          checks += 1;
          if (checks === 1) return;
          // Between the inserts and the second check, the new owner adopted the scope and claimed what it found.
          const found = await fx.instances.getRevisioned(claimed);
          await fx.instances.saveIf(found!.doc, found!.rev);
          throw new ScopeLostError("group:lobby");
        },
        kept,
      ),
      ScopeLostError,
    );
    assert.deepEqual([...kept], [claimed], "only the claimed record is reported kept (its reservation is the new owner's)");
    assert.equal(await fx.instances.getDoc("lobby-b1"), null);
    assert.equal(await fx.instances.getDoc("lobby-b3"), null);
    assert.equal((await fx.instances.getDoc(claimed))?.state, "SCHEDULED", "the new owner's claimed record stays");
  });

  test("a STATIC slot's finished record is replaced at its revision, and put back when withdrawn", async () => {
    const finished = instanceRecord({ id: "lobby-1", group: "lobby", node: "node-b", state: "STOPPED", stoppedAt: "2026-01-15T11:00:00.000Z" });
    await fx.instances.save(finished);
    let checks = 0;
    await assert.rejects(
      recordNewInstances(fx.instances, [scheduled("lobby-1")], async () => {
        if (++checks === 2) throw new ScopeLostError("group:lobby");
      }),
      ScopeLostError,
    );
    const back = await fx.instances.getDoc("lobby-1");
    assert.deepEqual([back?.state, back?.node], ["STOPPED", "node-b"]);
    await recordNewInstances(fx.instances, [scheduled("lobby-1")], async () => undefined);
    assert.equal((await fx.instances.getDoc("lobby-1"))?.state, "SCHEDULED");
  });

  test("a live record under the id is never overwritten; what the batch wrote is withdrawn", async () => {
    await fx.instances.save(instanceRecord({ id: "lobby-live", group: "lobby", node: "node-b", state: "RUNNING" }));
    await assert.rejects(
      recordNewInstances(fx.instances, [scheduled("lobby-c1"), scheduled("lobby-live")], async () => undefined),
      RevisionConflictError,
    );
    assert.equal((await fx.instances.getDoc("lobby-live"))?.state, "RUNNING");
    assert.equal(await fx.instances.getDoc("lobby-c1"), null);
  });
});

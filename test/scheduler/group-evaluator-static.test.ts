// The STATIC slot rule where the scheduler applies it: the group evaluator over the real group,
// instance and node services on an embedded store. A finished slot restarts under its own id on
// the node of its record, or waits there with a scheduling issue; a slot an operator stopped
// stays stopped until the group is started; a slot still stopping gets no new id meanwhile.
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, test } from "node:test";
import { GroupService } from "../../src/domain/groups/group-service.js";
import { InstanceService, type InstanceFields } from "../../src/domain/instances/instance-service.js";
import type { InstanceState } from "../../src/domain/instances/instance-schemas.js";
import { NodeService } from "../../src/domain/nodes/node-service.js";
import type { Logger } from "../../src/logs/types.js";
import { GroupEvaluator } from "../../src/scheduler/group-evaluator.js";
import { LiveInstances } from "../../src/scheduler/live-instances.js";
import { PlacementView } from "../../src/scheduler/placement-view.js";
import { MemoryKvStore } from "../../src/store/memory/memory-kv-store.js";
import { FINISHED_STATES } from "../../src/domain/instances/instance-schemas.js";
import { openStoreFixture, type StoreFixture } from "../support/store-fixture.js";

const quiet: Logger = { name: "test", trace: () => undefined, debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };

describe("group evaluator: STATIC slots", () => {
  let fx: StoreFixture;
  let groups: GroupService;
  let instances: InstanceService;
  let nodes: NodeService;
  let live: LiveInstances;
  let view: PlacementView;
  let evaluator: GroupEvaluator;
  const added: string[] = [];
  let group = "";
  let n = 0;

  before(async () => {
    fx = await openStoreFixture("cloud-evaluator-static-");
    instances = new InstanceService(fx.store, fx.clock);
    groups = new GroupService(fx.store, fx.events, fx.clock, instances);
    nodes = new NodeService(fx.store, fx.events, fx.clock, instances);
    for (const id of ["node-a", "node-b"]) await nodes.upsert(id, { host: id, state: "ONLINE", totalMemoryMb: 4096 });
  });
  after(() => fx.close());

  beforeEach(async () => {
    // A fresh group and scheduler view per test; the nodes are shared and reset to ONLINE.
    group = `hub${++n}`;
    for (const id of ["node-a", "node-b"]) await nodes.upsert(id, { host: id, state: "ONLINE", cordoned: false, usedMemoryMb: 0 });
    await groups.create({ name: group, platform: "simulated", scalingMode: "STATIC", minInstances: 2, memoryMb: 256, portRange: { start: 30000, end: 30010 } });
    live = new LiveInstances();
    view = new PlacementView(new MemoryKvStore({ clock: fx.clock }));
    added.length = 0;
    evaluator = new GroupEvaluator({
      groups,
      instances,
      nodes,
      live,
      view,
      clock: fx.clock,
      logger: quiet,
      nodeListCacheMs: 0,
      refusalBackoffMs: 15_000,
      startingPerNodeMax: 0,
      fencingTokenOf: () => 1,
      ensureCurrent: async () => undefined,
      instanceAdded: (instance) => void added.push(`${instance.id}@${instance.node}`),
      toInstance: () => undefined,
      nodesSeen: () => undefined,
    });
  });

  /** What the host does when an instance actor enters a state: the record and the live view follow. */
  async function enter(id: string, state: InstanceState): Promise<void> {
    const doc = (await instances.getDoc(id))!;
    const next: InstanceFields = { ...doc, state };
    await instances.save(next);
    live.setState(id, state);
    // The host frees the reservation of an instance that ended.
    if (FINISHED_STATES.has(state)) await view.release(id, doc.node);
  }
  /** As the host does on every node event: the next placement reads the node records again. */
  const evaluate = () => {
    evaluator.invalidateNodes();
    return evaluator.evaluate(group, new AbortController().signal);
  };

  test("a crashed slot restarts under its id on its node, even when another node has more room", async () => {
    await evaluate();
    assert.deepEqual(added.sort(), [`${group}-1@node-a`, `${group}-2@node-b`]);
    const home = (await instances.getDoc(`${group}-1`))!.node;
    await enter(`${group}-1`, "RUNNING");
    await enter(`${group}-2`, "RUNNING");
    await enter(`${group}-1`, "CRASHED");
    // The other node is emptier now: spread alone would pick it.
    await nodes.upsert(home, { host: home, usedMemoryMb: 3000 });
    added.length = 0;
    await evaluate();
    assert.deepEqual(added, [`${group}-1@${home}`]);
    assert.equal((await instances.list({ group })).length, 2, "no third record");
  });

  test("each start of a slot is recorded with a start id of its own: the id stays, the start id does not", async () => {
    await evaluate();
    const first = (await instances.getDoc(`${group}-1`))!.startId;
    const other = (await instances.getDoc(`${group}-2`))!.startId;
    assert.ok(first && other && first !== other, "every record names its start");
    await enter(`${group}-1`, "RUNNING");
    assert.equal((await instances.getDoc(`${group}-1`))!.startId, first, "state changes keep the start");
    await enter(`${group}-1`, "CRASHED");
    await evaluate();
    const second = (await instances.getDoc(`${group}-1`))!.startId;
    assert.ok(second, "the restarted slot names its start");
    assert.notEqual(second, first, "a restart of the slot is a new start");
  });

  test("a slot still stopping gets no replacement; once STOPPED it restarts under its id", async () => {
    await evaluate();
    await enter(`${group}-1`, "RUNNING");
    await enter(`${group}-2`, "RUNNING");
    await enter(`${group}-1`, "STOPPING");
    added.length = 0;
    await evaluate();
    assert.deepEqual([...added], [], `nothing starts while ${group}-1 is stopping`);
    await enter(`${group}-1`, "STOPPED");
    await evaluate();
    assert.deepEqual(
      added.map((a) => a.split("@")[0]),
      [`${group}-1`],
    );
  });

  test("a slot whose node cannot take it waits there, and the group record says why", async () => {
    await evaluate();
    const home = (await instances.getDoc(`${group}-2`))!.node;
    await enter(`${group}-1`, "RUNNING");
    await enter(`${group}-2`, "CRASHED");
    for (const [update, why] of [
      [{ state: "OFFLINE" }, "the node is OFFLINE"],
      [{ state: "DRAINING" }, "the node is DRAINING"],
      [{ state: "ONLINE", cordoned: true }, "the node is cordoned"],
      [{ state: "ONLINE", cordoned: false, usedMemoryMb: 4000 }, "insufficient memory: needs 256 MB"],
    ] as const) {
      await nodes.upsert(home, { host: home, ...update });
      added.length = 0;
      await evaluate();
      assert.deepEqual([...added], [], `not moved away (${why})`);
      const issue = (await groups.get(group)).schedulingIssue;
      assert.equal(issue?.code, "STATIC_NODE_UNAVAILABLE");
      assert.ok(issue?.message.startsWith(`${group}-2 waits for node ${home}, which holds its directory: ${why}`), issue?.message);
    }
    await nodes.upsert(home, { host: home, state: "ONLINE", usedMemoryMb: 0 });
    await evaluate();
    assert.deepEqual(added, [`${group}-2@${home}`]);
    assert.equal((await groups.get(group)).schedulingIssue, null, "cleared once placed");
  });

  test("a slot whose node record was deleted starts anywhere (its directory went with the node)", async () => {
    await evaluate();
    await enter(`${group}-1`, "RUNNING");
    await enter(`${group}-2`, "CRASHED");
    const gone = { ...(await instances.getDoc(`${group}-2`))!, node: "node-gone" };
    await instances.save(gone);
    live.put(gone);
    added.length = 0;
    await evaluate();
    assert.equal(added.length, 1);
    assert.match(added[0], new RegExp(`^${group}-2@node-[ab]$`));
  });

  test("a slot an operator stopped stays stopped until the group is started; then it goes back to its node", async () => {
    await evaluate();
    const home = (await instances.getDoc(`${group}-1`))!.node;
    await enter(`${group}-1`, "RUNNING");
    await enter(`${group}-2`, "RUNNING");
    assert.equal(await groups.setStoppedByOperator(group, `${group}-1`, true), true);
    await enter(`${group}-1`, "STOPPED");
    added.length = 0;
    await evaluate();
    assert.deepEqual([...added], [], "no replacement, no new id");
    assert.deepEqual((await groups.get(group)).stoppedInstances, [`${group}-1`]);
    assert.equal((await groups.get(group)).schedulingIssue, null, "an operator's stop is not a scheduling issue");
    evaluator.invalidateNodes();
    const started = await evaluator.startExplicitly(group);
    assert.deepEqual(started, { count: 1 });
    assert.deepEqual(added, [`${group}-1@${home}`]);
    assert.deepEqual((await groups.get(group)).stoppedInstances, []);
    assert.deepEqual((await evaluator.startExplicitly(group)).count, 0, "nothing more to start");
  });

  test("an explicit start while the stopped slot is still stopping says so and starts it once stopped", async () => {
    await evaluate();
    await enter(`${group}-1`, "RUNNING");
    await enter(`${group}-2`, "RUNNING");
    await groups.setStoppedByOperator(group, `${group}-2`, true);
    await enter(`${group}-2`, "STOPPING");
    added.length = 0;
    const started = await evaluator.startExplicitly(group);
    assert.equal(started.count, 0);
    assert.equal(started.reason, `${group}-2 still stopping: started again once stopped`);
    assert.deepEqual((await groups.get(group)).stoppedInstances, [], "the start released it");
    await enter(`${group}-2`, "STOPPED");
    await evaluate();
    assert.deepEqual(
      added.map((a) => a.split("@")[0]),
      [`${group}-2`],
    );
  });

  test("a group that is no longer STATIC forgets the stopped slots", async () => {
    await evaluate();
    await groups.setStoppedByOperator(group, `${group}-1`, true);
    await groups.update(group, { scalingMode: "DYNAMIC", maxInstances: 4 });
    await evaluate();
    assert.deepEqual((await groups.get(group)).stoppedInstances, []);
  });
});

// The group evaluator over the real group, instance and node services on an embedded store, with
// the fake clock: scaling up records SCHEDULED instances and hands them to their actors, scaling
// down sends STOP or DRAIN, a placement failure is the group's schedulingIssue until placement
// succeeds, start pacing waits without an issue, and a lost scope records nothing.
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, test } from "node:test";
import type { InstanceEvent } from "../../actors/instance/transitions.js";
import type { InstanceFields } from "../../src/domain/instances/instance-service.js";
import type { InstanceState } from "../../src/domain/instances/instance-schemas.js";
import { GroupEvaluator, type GroupEvaluatorDeps } from "../../src/scheduler/group-evaluator.js";
import { LiveInstances } from "../../src/scheduler/live-instances.js";
import { PlacementView } from "../../src/scheduler/placement-view.js";
import { MemoryKvStore } from "../../src/store/memory/memory-kv-store.js";
import { FINISHED_STATES } from "../../src/domain/instances/instance-schemas.js";
import { ScopeLostError } from "../../src/scheduler/scopes.js";
import { openSchedulerFixture, recordingLogger, type SchedulerFixture } from "./support.js";
import { createMetrics } from "../../src/metrics/metrics.js";

describe("group evaluator", () => {
  let fx: SchedulerFixture;
  let live: LiveInstances;
  let kv: MemoryKvStore;
  let view: PlacementView;
  let added: InstanceFields[];
  let sent: { id: string; event: InstanceEvent }[];
  let nodeListings: number;
  let group = "";
  let n = 0;
  const nodeIds = ["node-a", "node-b"];

  before(async () => {
    fx = await openSchedulerFixture("cloud-evaluator-");
  });
  after(() => fx.close());

  beforeEach(async () => {
    group = `lobby${++n}`;
    for (const id of nodeIds) await fx.nodes.upsert(id, { host: id, state: "ONLINE", cordoned: false, totalMemoryMb: 4096, usedMemoryMb: 0 });
    live = new LiveInstances();
    kv = new MemoryKvStore({ clock: fx.clock });
    view = new PlacementView(kv);
    added = [];
    sent = [];
    nodeListings = 0;
  });

  function evaluator(overrides: Partial<GroupEvaluatorDeps> = {}): GroupEvaluator {
    const nodes = { list: () => (nodeListings++, fx.nodes.list()) } as unknown as GroupEvaluatorDeps["nodes"];
    return new GroupEvaluator({
      groups: fx.groups,
      instances: fx.instances,
      nodes,
      live,
      view,
      clock: fx.clock,
      logger: recordingLogger(),
      nodeListCacheMs: 0,
      refusalBackoffMs: 15_000,
      startingPerNodeMax: 0,
      fencingTokenOf: () => 1,
      ensureCurrent: async () => undefined,
      instanceAdded: (instance) => {
        live.put(instance);
        added.push(instance);
      },
      toInstance: (id, event) => void sent.push({ id, event }),
      nodesSeen: () => undefined,
      ...overrides,
    });
  }
  const signal = () => new AbortController().signal;
  /** What the record writer does when an actor enters a state. */
  async function enter(id: string, state: InstanceState, playerCount = 0): Promise<void> {
    const doc = (await fx.instances.getDoc(id))!;
    await fx.instances.save({ ...doc, state, playerCount });
    live.setState(id, state);
    live.setPlayerCount(id, playerCount);
    if (FINISHED_STATES.has(state)) await view.release(id, doc.node);
  }

  test("scale up: minInstances new records, SCHEDULED, spread over the nodes, each handed to its actor", async () => {
    await fx.groups.create({ name: group, platform: "simulated", scalingMode: "DYNAMIC", minInstances: 4, maxInstances: 8, memoryMb: 256 });
    const output = await evaluator().evaluate(group, signal());
    assert.deepEqual(output, { again: false });
    assert.equal(added.length, 4);
    const records = await fx.instances.findDocs({ group });
    assert.deepEqual(
      records.map((r) => r.state),
      ["SCHEDULED", "SCHEDULED", "SCHEDULED", "SCHEDULED"],
    );
    assert.deepEqual(new Set(records.map((r) => r.id)), new Set(added.map((a) => a.id)));
    for (const node of nodeIds) assert.equal(records.filter((r) => r.node === node).length, 2, `two on ${node}`);
    assert.ok(
      records.every((r) => new RegExp(`^${group}-[0-9a-f]{8}$`).test(r.id)),
      "DYNAMIC ids are fresh",
    );
    assert.equal(live.ofGroup(group).length, 4);
    await evaluator().evaluate(group, signal());
    assert.equal(added.length, 4, "at the bound: nothing more");
  });

  test("scale down: a STATIC group stops its highest slots; a DYNAMIC group drains idle RUNNING instances after the cooldown", async () => {
    await fx.groups.create({ name: group, platform: "simulated", scalingMode: "STATIC", minInstances: 3, memoryMb: 256 });
    const ev = evaluator();
    await ev.evaluate(group, signal());
    for (const i of [1, 2, 3]) await enter(`${group}-${i}`, "RUNNING");
    await fx.groups.update(group, { minInstances: 1 });
    await ev.evaluate(group, signal());
    assert.deepEqual(sent.map((s) => `${s.id} ${s.event.type}`).sort(), [`${group}-2 STOP`, `${group}-3 STOP`]);

    const dynamic = `${group}-dyn`;
    await fx.groups.create({ name: dynamic, platform: "simulated", scalingMode: "DYNAMIC", minInstances: 3, maxInstances: 6, memoryMb: 256 });
    await ev.evaluate(dynamic, signal());
    for (const instance of live.ofGroup(dynamic)) await enter(instance.id, "RUNNING");
    await fx.groups.update(dynamic, { minInstances: 1 });
    sent.length = 0;
    await ev.evaluate(dynamic, signal());
    assert.equal(sent.length, 0, "idle since this evaluation: not yet");
    await fx.clock.advanceAsync(300_000);
    await ev.evaluate(dynamic, signal());
    assert.equal(sent.length, 2, "two idle instances above minInstances");
    assert.ok(
      sent.every((s) => s.event.type === "DRAIN"),
      JSON.stringify(sent),
    );
  });

  test("a placement failure is the group's schedulingIssue, kept with its first time, cleared once placed", async () => {
    await fx.groups.create({ name: group, platform: "simulated", scalingMode: "STATIC", minInstances: 2, memoryMb: 256 });
    for (const id of nodeIds) await fx.nodes.upsert(id, { host: id, state: "OFFLINE" });
    const ev = evaluator();
    await ev.evaluate(group, signal());
    assert.deepEqual(added, []);
    const first = (await fx.groups.get(group)).schedulingIssue;
    assert.equal(first?.code, "NO_ONLINE_NODE");
    await fx.clock.advanceAsync(5_000);
    await ev.evaluate(group, signal());
    assert.equal((await fx.groups.get(group)).schedulingIssue?.since, first?.since, "the same issue keeps its time");
    await fx.nodes.upsert("node-a", { host: "node-a", state: "ONLINE", usedMemoryMb: 3900 });
    // As the node watch does on every node event: the next placement reads the records again.
    ev.invalidateNodes();
    await ev.evaluate(group, signal());
    const memory = (await fx.groups.get(group)).schedulingIssue;
    assert.equal(memory?.code, "INSUFFICIENT_MEMORY");
    assert.match(memory!.message, /needs 256 MB/);
    assert.notEqual(memory?.since, first?.since, "another code, another since");
    await fx.nodes.upsert("node-a", { host: "node-a", usedMemoryMb: 0 });
    ev.invalidateNodes();
    await ev.evaluate(group, signal());
    assert.equal(added.length, 2);
    assert.equal((await fx.groups.get(group)).schedulingIssue, null);
  });

  test("start pacing: full start slots are a wait, not an issue; a freed slot lets the group place more", async () => {
    await fx.groups.create({ name: group, platform: "simulated", scalingMode: "DYNAMIC", minInstances: 5, maxInstances: 5, memoryMb: 256 });
    const ev = evaluator({ startingPerNodeMax: 1 });
    await ev.evaluate(group, signal());
    assert.equal(added.length, 2, "one starting per node");
    assert.equal((await fx.groups.get(group)).schedulingIssue, null);
    assert.deepEqual(ev.takeGroupsWaitingForSlots(), [group]);
    assert.deepEqual(ev.takeGroupsWaitingForSlots(), [], "taken once");
    await enter(added[0].id, "RUNNING");
    await ev.evaluate(group, signal());
    assert.equal(added.length, 3);
    assert.equal(added[2].node, added[0].node, "the freed slot's node");
    assert.deepEqual(ev.takeGroupsWaitingForSlots(), [group], "still waiting for the rest");
    // An explicit start is not paced: the operator asked for them now.
    const explicit = `${group}-x`;
    await fx.groups.create({ name: explicit, platform: "simulated", scalingMode: "STATIC", minInstances: 4, memoryMb: 256 });
    assert.deepEqual(await ev.startExplicitly(explicit), { count: 4 });
  });

  test("a scope lost before the records are written: nothing recorded, the live view rolled back", async () => {
    await fx.groups.create({ name: group, platform: "simulated", scalingMode: "STATIC", minInstances: 2, memoryMb: 256 });
    const ev = evaluator({
      ensureCurrent: async () => {
        throw new ScopeLostError(`group:${group}`);
      },
    });
    await assert.rejects(ev.evaluate(group, signal()), ScopeLostError);
    assert.deepEqual(added, []);
    assert.deepEqual(await fx.instances.findDocs({ group }), []);
    assert.deepEqual(live.ofGroup(group), []);
    for (const node of nodeIds) assert.equal(view.index.reservedMemoryMb(node), 0, `nothing reserved on ${node}`);
    await view.refresh();
    assert.deepEqual(
      view.reservations().filter((r) => r.group === group),
      [],
      "the claims of the unwritten records were released",
    );
  });

  test("a scope lost after the records were written: a record the new owner claimed keeps its reservation, the withdrawn ones' are released", async () => {
    await fx.groups.create({ name: group, platform: "simulated", scalingMode: "DYNAMIC", minInstances: 2, maxInstances: 2, memoryMb: 256 });
    let checks = 0;
    let claimed = "";
    const ev = evaluator({
      ensureCurrent: async () => {
        if (++checks === 1) return;
        // Between the inserts and the second check, the new owner adopted the scope and claimed one record.
        const found = await fx.instances.findRevisioned({ group });
        claimed = found[0].doc.id;
        await fx.instances.saveIf(found[0].doc, found[0].rev);
        throw new ScopeLostError(`group:${group}`);
      },
    });
    await assert.rejects(ev.evaluate(group, signal()), ScopeLostError);
    assert.deepEqual(added, []);
    assert.deepEqual(
      (await fx.instances.findDocs({ group })).map((d) => d.id),
      [claimed],
      "only the claimed record stays",
    );
    await view.refresh();
    assert.deepEqual(
      view
        .reservations()
        .filter((r) => r.group === group)
        .map((r) => r.instanceId),
      [claimed],
      "the claimed record's reservation stays (its port is taken); the withdrawn one's is released",
    );
  });

  test("two controllers place groups with the same port range at once: every instance placed, no port shared on a node", async () => {
    const other = `${group}-other`;
    for (const name of [group, other])
      await fx.groups.create({
        name,
        platform: "simulated",
        scalingMode: "DYNAMIC",
        minInstances: 6,
        maxInstances: 6,
        memoryMb: 256,
        portRange: { start: 31000, end: 31010 },
      });
    // A second controller: its own view and live instances over the same key-value store and records.
    const secondLive = new LiveInstances();
    const second = evaluator({ live: secondLive, view: new PlacementView(kv), instanceAdded: (i) => void (secondLive.put(i), added.push(i)) });
    await Promise.all([evaluator().evaluate(group, signal()), second.evaluate(other, signal())]);
    const records = [...(await fx.instances.findDocs({ group })), ...(await fx.instances.findDocs({ group: other }))];
    assert.equal(records.length, 12);
    const taken = records.map((r) => `${r.node}:${r.port}`);
    assert.equal(new Set(taken).size, 12, `no port twice on a node: ${taken.sort().join(" ")}`);
    for (const name of [group, other]) assert.equal((await fx.groups.get(name)).schedulingIssue, null);
  });

  test("memory reserved across controllers never passes a node's budget: the rest is an issue", async () => {
    const other = `${group}-other`;
    for (const name of [group, other])
      await fx.groups.create({ name, platform: "simulated", scalingMode: "DYNAMIC", minInstances: 3, maxInstances: 3, memoryMb: 1500 });
    const secondLive = new LiveInstances();
    const second = evaluator({ live: secondLive, view: new PlacementView(kv), instanceAdded: (i) => void (secondLive.put(i), added.push(i)) });
    await Promise.all([evaluator().evaluate(group, signal()), second.evaluate(other, signal())]);
    const records = [...(await fx.instances.findDocs({ group })), ...(await fx.instances.findDocs({ group: other }))];
    for (const node of nodeIds) {
      const reserved = records.filter((r) => r.node === node).reduce((sum, r) => sum + r.memoryMb, 0);
      assert.ok(reserved <= 4096, `${reserved} MB reserved on ${node}`);
    }
    assert.equal(records.length, 4, "two of 1,500 MB per 4,096 MB node");
    const issues = [(await fx.groups.get(group)).schedulingIssue, (await fx.groups.get(other)).schedulingIssue].filter((i) => i !== null);
    assert.ok(issues.length >= 1 && issues.every((i) => i?.code === "INSUFFICIENT_MEMORY"), JSON.stringify(issues));
  });

  test("a reservation released by another controller is seen before a failure is reported", async () => {
    await fx.groups.create({ name: group, platform: "simulated", scalingMode: "STATIC", minInstances: 1, memoryMb: 4000 });
    const elsewhere = new PlacementView(kv);
    for (const node of nodeIds) {
      const r = { instanceId: `other-${node}`, group: "other", node, port: 30000, memoryMb: 4000, claimedAtMs: 0 };
      elsewhere.hold(r);
      await elsewhere.claim([r], () => 4096);
    }
    await view.refresh(); // this controller read the view while the other instances ran
    await elsewhere.forget(elsewhere.reservations().filter((r) => r.group === "other")); // they ended since
    await evaluator().evaluate(group, signal());
    assert.equal(added.length, 1, "placed on the view read again");
    assert.equal((await fx.groups.get(group)).schedulingIssue, null);
  });

  test("a node that refused a start is the group's issue and is left out of its placements for the backoff", async () => {
    await fx.groups.create({ name: group, platform: "simulated", scalingMode: "DYNAMIC", minInstances: 1, maxInstances: 4, memoryMb: 256 });
    const ev = evaluator();
    await ev.nodeRefused(group, "node-a", "PORT_IN_USE", "Port 30000 is used by x-1 (RUNNING) on this node");
    const issue = (await fx.groups.get(group)).schedulingIssue;
    assert.deepEqual([issue?.code, issue?.message], ["PORT_IN_USE", "node node-a refused a start: Port 30000 is used by x-1 (RUNNING) on this node"]);
    await ev.evaluate(group, signal());
    assert.deepEqual(
      added.map((a) => a.node),
      ["node-b"],
      "the other node takes it",
    );
    assert.equal((await fx.groups.get(group)).schedulingIssue, null, "placed: the issue is cleared");
    await fx.nodes.upsert("node-b", { host: "node-b", state: "OFFLINE" });
    ev.invalidateNodes();
    await ev.nodeRefused(group, "node-a", "INSUFFICIENT_MEMORY", "no room");
    await fx.groups.update(group, { minInstances: 2 });
    await ev.evaluate(group, signal());
    assert.equal(added.length, 1, "only the refusing node is ONLINE: it waits");
    assert.equal((await fx.groups.get(group)).schedulingIssue?.code, "INSUFFICIENT_MEMORY", "the refusal stays the issue while it waits");
    await fx.clock.advanceAsync(15_000);
    await ev.evaluate(group, signal());
    assert.deepEqual(
      added.map((a) => a.node),
      ["node-b", "node-a"],
      "tried again after the backoff",
    );
    await fx.nodes.upsert("node-b", { host: "node-b", state: "ONLINE" });
  });

  test("the node list is reused for nodeListCacheMs of the clock, and read again once invalidated", async () => {
    await fx.groups.create({ name: group, platform: "simulated", scalingMode: "MANUAL", minInstances: 0, maxInstances: 9, memoryMb: 256 });
    const ev = evaluator({ nodeListCacheMs: 1_000 });
    // A MANUAL group's explicit start places one instance at a time.
    await ev.startExplicitly(group);
    await fx.clock.advanceAsync(1_000);
    await ev.startExplicitly(group);
    assert.equal(nodeListings, 1, "within the cache time");
    await fx.clock.advanceAsync(1);
    await ev.startExplicitly(group);
    assert.equal(nodeListings, 2, "stale after the cache time");
    ev.invalidateNodes();
    await ev.startExplicitly(group);
    assert.equal(nodeListings, 3, "invalidated");
    assert.equal(added.length, 4);
  });

  test("the deployments seam: one instance of a revision, placed at once; a reason when none can be", async () => {
    await fx.groups.create({ name: group, platform: "simulated", scalingMode: "DYNAMIC", minInstances: 0, maxInstances: 4, memoryMb: 256 });
    const ev = evaluator({ startingPerNodeMax: 1 });
    const first = await ev.startInstanceOfRevision(group, 7);
    assert.equal(first.started, true);
    const second = await ev.startInstanceOfRevision(group, 7);
    const third = await ev.startInstanceOfRevision(group, 7);
    assert.ok(second.started && third.started, "not paced");
    const records = await fx.instances.findDocs({ group });
    assert.deepEqual(
      records.map((r) => r.deploymentRevision),
      [7, 7, 7],
    );
    assert.deepEqual(added.map((a) => a.id).sort(), records.map((r) => r.id).sort());
    for (const id of nodeIds) await fx.nodes.upsert(id, { host: id, state: "OFFLINE" });
    ev.invalidateNodes();
    const refused = await ev.startInstanceOfRevision(group, 8);
    assert.equal(refused.started, false);
    assert.match(!refused.started ? refused.reason : "", /ONLINE/);
    await assert.rejects(ev.startInstanceOfRevision("no-such-group", 1), { code: "NOT_FOUND" });
  });
  test("scaling on load: the samples of RUNNING instances are read; a lasting low TPS adds one instance, never above maxInstances", async () => {
    await fx.groups.create({
      name: group,
      platform: "simulated",
      scalingMode: "DYNAMIC",
      minInstances: 1,
      maxInstances: 2,
      memoryMb: 256,
      loadScaling: { minTps: 18, sustainSeconds: 30, cooldownSeconds: 0 },
    });
    const tps = new Map<string, number>();
    const asked: string[][] = [];
    const logger = recordingLogger();
    let failing = false;
    const ev = evaluator({
      logger,
      loadSamples: async (ids) => {
        asked.push([...ids]);
        if (failing) throw new Error("kv down");
        return ids
          .filter((id) => tps.has(id))
          .map((id) => ({ instanceId: id, tps1m: tps.get(id)!, msptAvg: 1000 / tps.get(id)!, reportedAtMs: fx.clock.nowMs() }));
      },
    });
    await ev.evaluate(group, signal());
    assert.equal(added.length, 1);
    assert.deepEqual(asked, [], "nothing RUNNING: no samples asked for");
    const [first] = added;
    await enter(first.id, "RUNNING", 3);
    tps.set(first.id, 9);

    for (const step of [0, 15_000]) {
      await fx.clock.advanceAsync(step);
      await ev.evaluate(group, signal());
      assert.equal(added.length, 1, "the breach has not lasted 30 s yet");
    }
    assert.deepEqual(asked.at(-1), [first.id]);
    // A failing read (30 s after the first low one) is no breach: the breach starts again from the next reading.
    failing = true;
    await fx.clock.advanceAsync(15_000);
    await ev.evaluate(group, signal());
    assert.equal(added.length, 1);
    assert.match(logger.warnings.at(-1) ?? "", /load samples unavailable: kv down/);
    failing = false;
    for (const step of [15_000, 15_000]) {
      await fx.clock.advanceAsync(step);
      await ev.evaluate(group, signal());
    }
    assert.equal(added.length, 1, "30 s counted from the reading after the failure");
    await fx.clock.advanceAsync(15_000);
    await ev.evaluate(group, signal());
    assert.equal(added.length, 2, "one more instance after 30 s below 18 TPS");
    assert.equal((await fx.instances.getDoc(added[1].id))?.state, "SCHEDULED");

    await enter(added[1].id, "RUNNING");
    tps.set(added[1].id, 12);
    for (let i = 0; i < 5; i++) {
      await fx.clock.advanceAsync(15_000);
      await ev.evaluate(group, signal());
    }
    assert.equal(added.length, 2, "mean 10.5 TPS, but maxInstances is 2");
    assert.deepEqual(new Set(asked.at(-1)), new Set([first.id, added[1].id]));
    assert.equal(sent.length, 0, "load never stops anything");

    // Without thresholds the samples are not read at all.
    await fx.groups.update(group, { loadScaling: null });
    const before = asked.length;
    await ev.evaluate(group, signal());
    assert.equal(asked.length, before);
  });

  test("composition planning: a build that cannot be started or a revision that cannot be resolved counts a failure; a download under way does not", async () => {
    const metrics = createMetrics({ enabled: true });
    const failures = async () => Number(/^cloud_composition_planning_failures_total (\S+)$/m.exec(await metrics.render())?.[1]);
    assert.equal(await failures(), 0, "registered at zero");
    await fx.groups.create({ name: group, platform: "simulated", scalingMode: "DYNAMIC", minInstances: 1, maxInstances: 2, memoryMb: 256 });
    const build = { version: "1.0", sha256: "a".repeat(64), downloadUrl: "http://127.0.0.1:1/server.jar" };
    let check: { ok: true } | { ok: false; code: string; message: string } = { ok: false, code: "BUILD_DOWNLOADING", message: "fetching" };
    let resolveFails = false;
    const ev = evaluator({
      revisions: {
        resolve: async () => {
          if (resolveFails) throw new Error("revision store unavailable");
          return { revision: 1, memoryMb: 256, build };
        },
      },
      buildCheck: async () => check,
      compositionPlanningFailed: () => metrics.compositionPlanningFailures.inc(),
    });
    await ev.evaluate(group, signal());
    assert.equal(added.length, 0, "nothing placed while the build downloads");
    assert.equal(await failures(), 0, "a download under way is not a failure");
    check = { ok: false, code: "BUILD_HASH_MISMATCH", message: "wrong digest" };
    await ev.evaluate(group, signal());
    assert.equal(added.length, 0);
    assert.equal((await fx.groups.getDoc(group))?.schedulingIssue?.code, "BUILD_HASH_MISMATCH");
    assert.equal(await failures(), 1);
    resolveFails = true;
    await assert.rejects(ev.evaluate(group, signal()), /revision store unavailable/);
    assert.equal(await failures(), 2);
    resolveFails = false;
    check = { ok: true };
    await ev.evaluate(group, signal());
    assert.equal(added.length, 1, "placed once the build can start");
    assert.equal(await failures(), 2, "success counts nothing");
  });
});

// The shared placement view over the in-memory store and a real Redis: several views stand for
// several controllers placing on the same machine. Whatever the interleaving, a port is reserved by
// one instance and a node's reserved memory stays within its budget; what one controller claims or
// releases is what another sees after its next read.
import assert from "node:assert/strict";
import { it } from "node:test";
import { decodeLedger, placementLedgerKey, type Reservation } from "../../src/scheduler/placement-ledger.js";
import { lowestFreePort, placeInstance } from "../../src/scheduler/placement.js";
import { PlacementView } from "../../src/scheduler/placement-view.js";
import { describeEachKv, withEnv } from "../coordination/support.js";

const reservation = (instanceId: string, node: string, port: number, memoryMb = 100, group = "g"): Reservation => ({
  instanceId,
  group,
  node,
  port,
  memoryMb,
  claimedAtMs: 1,
});

describeEachKv("placement view", (makeEnv) => {
  it("two controllers claiming one port at once: one gets it, the other is refused and then sees it taken", () =>
    withEnv(makeEnv, async (env) => {
      const node = env.unique("node");
      const [a, b] = [new PlacementView(await env.connect()), new PlacementView(await env.connect())];
      for (let round = 0; round < 20; round++) {
        const port = 30_000 + round;
        const mine = reservation(`a-${round}`, node, port);
        const theirs = reservation(`b-${round}`, node, port);
        a.hold(mine);
        b.hold(theirs);
        const [refusedA, refusedB] = await Promise.all([a.claim([mine], () => 10_000), b.claim([theirs], () => 10_000)]);
        assert.equal(refusedA.size + refusedB.size, 1, `round ${round}: exactly one claim of port ${port} is refused`);
        const [winner, loser] = refusedA.size === 0 ? [mine, refusedB] : [theirs, refusedA];
        assert.equal([...loser.values()][0].code, "PORT_TAKEN");
        assert.match([...loser.values()][0].message, new RegExp(`port ${port} is reserved by ${winner.instanceId}`));
        for (const view of [a, b]) assert.ok(view.index.portUsed(node, port), "both views show the port taken");
      }
      const ledger = decodeLedger(await (await env.connect()).get(placementLedgerKey(node)));
      assert.equal(ledger.size, 20);
      assert.equal(new Set([...ledger.values()].map((e) => e.reservation.port)).size, 20, "no port twice in the ledger");
    }));

  it("memory across controllers never passes the node's budget; a release frees it for the others", () =>
    withEnv(makeEnv, async (env) => {
      const node = env.unique("node");
      const views = [new PlacementView(await env.connect()), new PlacementView(await env.connect())];
      const claims = views.map((view, v) =>
        Array.from({ length: 3 }, (_, i) => {
          const r = reservation(`v${v}-${i}`, node, 31_000 + v * 10 + i, 300, `group-${v}`);
          view.hold(r);
          return r;
        }),
      );
      const refused = await Promise.all(views.map((view, v) => view.claim(claims[v], () => 1_000)));
      assert.equal(refused[0].size + refused[1].size, 3, "3 × 300 MB of 6 fit in 1,000 MB");
      for (const verdicts of refused) for (const why of verdicts.values()) assert.equal(why.code, "MEMORY_FULL");
      await views[0].refresh();
      assert.equal(views[0].index.reservedMemoryMb(node), 900);
      const claimed = claims.flat().filter((r, i) => !refused[Math.floor(i / 3)].has(r.instanceId));
      await views[1].release(claimed[0].instanceId, node);
      await views[0].refresh();
      assert.equal(views[0].index.reservedMemoryMb(node), 600, "the release is seen by the other controller after its next read");
      const again = reservation("late", node, 31_100, 400);
      views[0].hold(again);
      assert.equal((await views[0].claim([again], () => 1_000)).size, 0, "the freed memory is given again");
    }));

  it("many placements on three controllers at once: no port twice, memory within the budget, every view converges", () =>
    withEnv(makeEnv, async (env) => {
      const node = env.unique("node");
      const host = env.unique("host");
      const views = [0, 1, 2].map(() => undefined);
      const controllers = await Promise.all(views.map(async () => new PlacementView(await env.connect())));
      for (const view of controllers) view.setNodeHost(node, host);
      const nodes = [{ id: node, state: "ONLINE" as const, cordoned: false, totalMemoryMb: 4_000, usedMemoryMb: 0 }];
      const group = { name: "g", memoryMb: 100, portRange: { start: 32_000, end: 32_100 } };
      // Each controller places 20 instances one by one on the view it has, and claims each.
      await Promise.all(
        controllers.map(async (view, c) => {
          for (let i = 0; i < 20; i++) {
            for (let attempt = 0; ; attempt++) {
              const placed = placeInstance({ group }, nodes, view.index);
              if (!placed.ok) return;
              const r = reservation(`c${c}-${i}`, node, placed.port, group.memoryMb);
              view.hold(r);
              if ((await view.claim([r], () => 4_000)).size === 0) break;
              // Each refusal means another controller's claim won: at most as many as the node holds.
              assert.ok(attempt < 40, "a refused placement finds another port on the view its claim refreshed");
            }
          }
        }),
      );
      const ledger = decodeLedger(await (await env.connect()).get(placementLedgerKey(host)));
      const ports = [...ledger.values()].map((e) => e.reservation.port);
      assert.equal(new Set(ports).size, ports.length, "no port reserved twice");
      assert.equal(ports.length, 40, "memory allows 40 × 100 MB");
      for (const view of controllers) {
        await view.refresh();
        assert.equal(view.index.reservedMemoryMb(node), 4_000);
        assert.equal(lowestFreePort(group, node, view.index), 32_040);
      }
    }));

  it("ensure enters running instances without a check; forget removes stale ones; an empty ledger is deleted", () =>
    withEnv(makeEnv, async (env) => {
      const node = env.unique("node");
      const kv = await env.connect();
      const view = new PlacementView(kv);
      await view.ensure([reservation("run-1", node, 33_000, 800), reservation("run-2", node, 33_000, 800)]);
      assert.equal(view.index.reservedMemoryMb(node), 1_600, "what runs is shown even beyond the budget");
      const other = new PlacementView(await env.connect());
      await other.refresh();
      const onNode = (v: PlacementView) => v.reservations().filter((r) => r.node === node);
      assert.deepEqual(
        onNode(other)
          .map((r) => r.instanceId)
          .sort(),
        ["run-1", "run-2"],
      );
      const late = reservation(`${node}-late`, node, 33_001, 100);
      other.hold(late);
      assert.equal((await other.claim([late], () => 1_000)).get(late.instanceId)?.code, "MEMORY_FULL");
      assert.equal(other.has(late.instanceId), false, "a refused claim is no longer held");
      await other.forget(onNode(other));
      assert.equal(await kv.get(placementLedgerKey(node)), null, "the emptied ledger is gone");
      await view.refresh();
      assert.equal(view.index.reservedMemoryMb(node), 0);
    }));

  it("a line of another format reserves nothing and is dropped by the next write", () =>
    withEnv(makeEnv, async (env) => {
      const node = env.unique("node");
      const kv = await env.connect();
      await kv.set(placementLedgerKey(node), `garbage\n${JSON.stringify(["x-1", node, 34_000, 100, "g", 5])}\n["short"]`);
      const view = new PlacementView(kv);
      await view.refresh();
      assert.deepEqual(
        view
          .reservations()
          .filter((r) => r.node === node)
          .map((r) => r.instanceId),
        ["x-1"],
      );
      const next = reservation("x-2", node, 34_001);
      view.hold(next);
      await view.claim([next], () => 1_000);
      assert.equal((await kv.get(placementLedgerKey(node)))?.split("\n").length, 2);
    }));
});

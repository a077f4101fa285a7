/**
 * Leader election between dashboard tabs (src/dashboard/live/tab-election.ts) over a fake broadcast
 * bus and the fake clock: one leader among many tabs, a new tab joins the existing leader, a leader
 * that leaves or goes silent is replaced within the bounds, and two leaders settle on one.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { FakeClock } from "../support/fake-clock.js";
import { CLAIM_WINDOW_MS, HEARTBEAT_MS, LEADER_TIMEOUT_MS, TabElection, type ElectionMessage } from "../../src/dashboard/live/tab-election.js";
import { FakeBus, fakeTimers, settle } from "./fakes.js";

function tabs(clock: FakeClock, bus: FakeBus, ids: string[]) {
  return ids.map((id) => {
    const channel = bus.channel();
    const tab = new TabElection({ id, post: (m) => channel.post(m), timers: fakeTimers(clock), onRole: () => undefined });
    channel.listen((m) => tab.receive(m as ElectionMessage));
    return { id, tab, channel };
  });
}

/** Advances the clock in small steps, letting the bus deliver between them. */
async function run(clock: FakeClock, ms: number) {
  for (let t = 0; t < ms; t += 50) {
    clock.advance(50);
    await settle();
  }
}

const leaders = (list: { tab: TabElection; id: string }[]) => list.filter((t) => t.tab.isLeader).map((t) => t.id);

describe("tab election", () => {
  test("of several tabs starting together exactly one leads, and it stays the one", async () => {
    const clock = new FakeClock();
    const bus = new FakeBus();
    const all = tabs(clock, bus, ["c", "a", "d", "b"]);
    for (const t of all) t.tab.start();
    await run(clock, CLAIM_WINDOW_MS * 4);
    assert.deepEqual(leaders(all), ["a"]);
    await run(clock, LEADER_TIMEOUT_MS * 3);
    assert.deepEqual(leaders(all), ["a"]);
  });

  test("a tab opened later follows the leader at once, even with a smaller id", async () => {
    const clock = new FakeClock();
    const bus = new FakeBus();
    const all = tabs(clock, bus, ["m", "n"]);
    for (const t of all) t.tab.start();
    await run(clock, CLAIM_WINDOW_MS * 4);
    const [late] = tabs(clock, bus, ["0"]);
    late.tab.start();
    await run(clock, LEADER_TIMEOUT_MS * 2);
    assert.deepEqual(leaders([...all, late]), ["m"]);
  });

  test("a leader that closes says bye and another tab leads within the claim window", async () => {
    const clock = new FakeClock();
    const bus = new FakeBus();
    const all = tabs(clock, bus, ["a", "b", "c"]);
    for (const t of all) t.tab.start();
    await run(clock, CLAIM_WINDOW_MS * 4);
    all[0].tab.stop();
    all[0].channel.close();
    await run(clock, CLAIM_WINDOW_MS * 3);
    assert.deepEqual(leaders(all.slice(1)), ["b"]);
  });

  test("a leader that goes silent (tab frozen or killed) is replaced after the timeout, not before", async () => {
    const clock = new FakeClock();
    const bus = new FakeBus();
    const all = tabs(clock, bus, ["a", "b", "c"]);
    for (const t of all) t.tab.start();
    await run(clock, CLAIM_WINDOW_MS * 4);
    all[0].channel.close(); // no bye: it just stops talking
    await run(clock, LEADER_TIMEOUT_MS - HEARTBEAT_MS - 100);
    assert.deepEqual(leaders(all.slice(1)), []);
    await run(clock, HEARTBEAT_MS + CLAIM_WINDOW_MS * 4);
    assert.deepEqual(leaders(all.slice(1)), ["b"]);
  });

  test("two leaders (a partitioned channel healing) settle on the smaller id", async () => {
    const clock = new FakeClock();
    const left = new FakeBus();
    const right = new FakeBus();
    const [x] = tabs(clock, left, ["x"]);
    const [y] = tabs(clock, right, ["y"]);
    x.tab.start();
    y.tab.start();
    await run(clock, CLAIM_WINDOW_MS * 4);
    assert.ok(x.tab.isLeader && y.tab.isLeader);
    // The channels join: each now hears the other's heartbeats.
    y.tab.receive({ k: "hb", from: "x" });
    x.tab.receive({ k: "hb", from: "y" });
    assert.deepEqual(leaders([x, y]), ["x"]);
  });
});

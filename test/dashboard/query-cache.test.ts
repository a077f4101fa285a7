/**
 * The live query cache (src/dashboard/live/query-cache.ts): a watched query is fetched; events
 * that concern it fetch it again, never more often than its interval whatever the event rate, and
 * never losing the last change; patches apply without a fetch; a resync fetches every watched
 * query; unwatched queries are not fetched.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { FakeClock } from "../support/fake-clock.js";
import { QueryCache, REFETCH_MIN_INTERVAL_MS, type QueryState } from "../../src/dashboard/live/query-cache.js";
import { patchInstanceRows } from "../../src/dashboard/live/event-reducer.js";
import { event, fakeTimers, settle } from "./fakes.js";

function counter() {
  let version = 0;
  const loads: number[] = [];
  return {
    loads,
    bump: () => version++,
    load: async () => {
      loads.push(version);
      return version;
    },
  };
}

describe("query cache", () => {
  test("watching fetches; an event that concerns the query fetches it again; others do not", async () => {
    const clock = new FakeClock();
    const cache = new QueryCache(fakeTimers(clock));
    const source = counter();
    const states: QueryState<number>[] = [];
    cache.watch("groups", { load: source.load, watch: (e) => e.type.startsWith("GROUP_") }, (s) => states.push(s));
    await settle();
    assert.equal(states.at(-1)!.data, 0);
    source.bump();
    cache.events([event(1, "NODE_STATUS", {})]);
    clock.advance(REFETCH_MIN_INTERVAL_MS * 2);
    await settle();
    assert.equal(source.loads.length, 1);
    cache.events([event(2, "GROUP_UPDATED")]);
    clock.advance(REFETCH_MIN_INTERVAL_MS);
    await settle();
    assert.equal(states.at(-1)!.data, 1);
  });

  test("a burst of events costs at most one fetch per interval, and the last change is always fetched", async () => {
    const clock = new FakeClock();
    const cache = new QueryCache(fakeTimers(clock));
    const source = counter();
    let shown = -1;
    cache.watch("groups", { load: source.load, watch: () => true }, (s) => (shown = s.data ?? -1));
    await settle();
    const durationMs = 5_000;
    // 200 events a second, each changing the data.
    for (let t = 0; t < durationMs; t += 5) {
      source.bump();
      cache.events([event(t + 1)]);
      clock.advance(5);
      await settle();
    }
    const bound = Math.ceil(durationMs / REFETCH_MIN_INTERVAL_MS) + 2;
    assert.ok(source.loads.length <= bound, `${source.loads.length} fetches for ${durationMs} ms (bound ${bound})`);
    clock.advance(REFETCH_MIN_INTERVAL_MS);
    await settle();
    assert.equal(shown, source.loads.at(-1));
    assert.equal(shown, 1000, "the screen ends at the final state");
  });

  test("patches apply in place without a fetch", async () => {
    const clock = new FakeClock();
    const cache = new QueryCache(fakeTimers(clock));
    let loads = 0;
    const rows: readonly { id: string; state: string }[] = [{ id: "a", state: "STARTING" }];
    let shown: readonly { id: string; state: string }[] = [];
    cache.watch(
      "instances",
      {
        load: async () => {
          loads++;
          return rows;
        },
        patch: (data, batch) => patchInstanceRows(data, batch),
      },
      (s) => (shown = s.data ?? []),
    );
    await settle();
    cache.events([event(1, "INSTANCE_STATE_CHANGED", { instanceId: "a", newState: "RUNNING" })]);
    assert.equal(shown[0].state, "RUNNING");
    assert.equal(loads, 1);
  });

  test("a resync fetches every watched query; an unwatched one is left alone", async () => {
    const clock = new FakeClock();
    const cache = new QueryCache(fakeTimers(clock));
    const a = counter();
    const b = counter();
    cache.watch("a", { load: a.load }, () => undefined);
    const unwatch = cache.watch("b", { load: b.load }, () => undefined);
    await settle();
    unwatch();
    clock.advance(REFETCH_MIN_INTERVAL_MS);
    cache.resync();
    await settle();
    assert.equal(a.loads.length, 2);
    assert.equal(b.loads.length, 1);
    assert.equal(cache.peek<number>("b")!.data, 0, "its last data stays for a return to the page");
  });

  test("a failed fetch keeps the last data and reports the error", async () => {
    const clock = new FakeClock();
    const cache = new QueryCache(fakeTimers(clock));
    let fail = false;
    let last: QueryState<string> | undefined;
    cache.watch(
      "x",
      {
        load: async () => {
          if (fail) throw new Error("down");
          return "ok";
        },
      },
      (s) => (last = s),
    );
    await settle();
    fail = true;
    cache.refresh("x");
    await settle();
    assert.equal(last!.data, "ok");
    assert.equal((last!.error as Error).message, "down");
  });
});

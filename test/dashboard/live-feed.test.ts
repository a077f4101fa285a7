/**
 * The shared live feed (src/dashboard/live/live-feed.ts): several tabs on one channel open one
 * stream between them; the others get its events, resyncs and status through the channel; when the
 * leading tab closes, another resumes the stream from the last sequence it saw, so no event is lost
 * or delivered twice; without a channel a tab streams on its own; deliveries are batched.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { FakeClock } from "../support/fake-clock.js";
import { FEED_BATCH_MS, LiveFeed } from "../../src/dashboard/live/live-feed.js";
import { CLAIM_WINDOW_MS } from "../../src/dashboard/live/tab-election.js";
import type { ResyncReason, StreamStatus } from "../../src/dashboard/live/types.js";
import { event, FakeBus, FakeTransport, fakeTimers, frame, settle } from "./fakes.js";

async function run(clock: FakeClock, ms: number) {
  for (let t = 0; t < ms; t += 16) {
    clock.advance(16);
    await settle();
  }
}

function tab(clock: FakeClock, bus: FakeBus | null, id: string) {
  const transport = new FakeTransport();
  const feed = new LiveFeed({ transport, timers: fakeTimers(clock), channel: bus ? bus.channel() : null, tabId: id, random: () => 0.5 });
  const seen: number[] = [];
  const batches: number[] = [];
  const resyncs: ResyncReason[] = [];
  const statuses: StreamStatus[] = [];
  feed.subscribe({
    events: (batch) => {
      batches.push(batch.length);
      seen.push(...batch.map((e) => e.sequence));
    },
    resync: (reason) => resyncs.push(reason),
    status: (s) => statuses.push(s),
  });
  return { feed, transport, seen, batches, resyncs, statuses };
}

describe("live feed shared by tabs", () => {
  test("three tabs hold one stream; every tab sees every event once, in order", async () => {
    const clock = new FakeClock();
    const bus = new FakeBus();
    const all = ["a", "b", "c"].map((id) => tab(clock, bus, id));
    for (const t of all) t.feed.start();
    await run(clock, CLAIM_WINDOW_MS * 4);
    const opened = all.map((t) => t.transport.opened.length);
    assert.deepEqual(opened, [1, 0, 0], "only the leader opens a stream");
    const stream = all[0].transport.last;
    stream.handlers.connected(100);
    for (let n = 101; n <= 110; n++) stream.handlers.message(frame(event(n)));
    await run(clock, FEED_BATCH_MS * 3);
    for (const t of all) {
      assert.deepEqual(t.seen, [101, 102, 103, 104, 105, 106, 107, 108, 109, 110]);
      assert.deepEqual(t.resyncs, ["initial"]);
      assert.equal(t.statuses.at(-1), "live");
    }
    assert.deepEqual(all[1].batches, [10], "a burst reaches the page as one batch");
  });

  test("when the leading tab closes, another resumes from the last sequence it saw: nothing lost, nothing twice", async () => {
    const clock = new FakeClock();
    const bus = new FakeBus();
    const [a, b] = ["a", "b"].map((id) => tab(clock, bus, id));
    a.feed.start();
    b.feed.start();
    await run(clock, CLAIM_WINDOW_MS * 4);
    a.transport.last.handlers.connected(0);
    for (let n = 1; n <= 5; n++) a.transport.last.handlers.message(frame(event(n)));
    await run(clock, FEED_BATCH_MS * 2);
    a.feed.stop();
    await run(clock, CLAIM_WINDOW_MS * 4);
    assert.equal(b.transport.opened.length, 1);
    assert.equal(b.transport.last.lastSequence, 5, "resumes where the old leader's stream was");
    b.transport.last.handlers.connected(8);
    for (let n = 4; n <= 8; n++) b.transport.last.handlers.message(frame(event(n)));
    await run(clock, FEED_BATCH_MS * 2);
    assert.deepEqual(b.seen, [1, 2, 3, 4, 5, 6, 7, 8]);
    assert.deepEqual(b.resyncs, ["initial"], "the takeover needs no refetch");
  });

  test("a resync on the leader's stream makes every tab refetch", async () => {
    const clock = new FakeClock();
    const bus = new FakeBus();
    const [a, b] = ["a", "b"].map((id) => tab(clock, bus, id));
    a.feed.start();
    b.feed.start();
    await run(clock, CLAIM_WINDOW_MS * 4);
    a.transport.last.handlers.connected(3);
    a.transport.last.handlers.message(frame({ type: "RESYNC_REQUIRED", lastSequence: 3, earliestSequence: 10, latestSequence: 50 }));
    await run(clock, FEED_BATCH_MS);
    assert.deepEqual(b.resyncs, ["initial", "resync-required"]);
    assert.equal(b.feed.lastSequence, 50);
  });

  test("without a channel a tab runs its own stream", async () => {
    const clock = new FakeClock();
    const solo = tab(clock, null, "solo");
    solo.feed.start();
    await settle();
    assert.equal(solo.transport.opened.length, 1);
    solo.transport.last.handlers.connected(1);
    solo.transport.last.handlers.message(frame(event(2)));
    await run(clock, FEED_BATCH_MS);
    assert.deepEqual(solo.seen, [2]);
  });
});

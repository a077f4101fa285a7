/**
 * The event-stream client of the dashboard (src/dashboard/live/stream-session.ts) against a fake
 * transport and the fake clock: the first connection asks for a refetch and remembers the latest
 * sequence; a dropped connection comes back with a new ticket and `lastSequence`, and the replay's
 * duplicates are dropped; RESYNC_REQUIRED and a gap ask for a refetch; errors back off, and a refused
 * ticket stops it.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { FakeClock } from "../support/fake-clock.js";
import { EventStreamSession, RECONNECT_INITIAL_MS, RECONNECT_MAX_MS } from "../../src/dashboard/live/stream-session.js";
import type { LiveEvent, ResyncReason, StreamStatus } from "../../src/dashboard/live/types.js";
import { event, FakeTransport, fakeTimers, frame, settle } from "./fakes.js";

function setup(lastSequence: number | null = null) {
  const clock = new FakeClock(1_000);
  const transport = new FakeTransport();
  const delivered: number[] = [];
  const resyncs: ResyncReason[] = [];
  const statuses: StreamStatus[] = [];
  const session = new EventStreamSession({
    transport,
    timers: fakeTimers(clock),
    lastSequence,
    random: () => 0.5,
    listener: {
      events: (batch: readonly LiveEvent[]) => delivered.push(...batch.map((e) => e.sequence)),
      resync: (reason) => resyncs.push(reason),
      status: (s) => statuses.push(s),
    },
  });
  return { clock, transport, session, delivered, resyncs, statuses };
}

describe("event stream session", () => {
  test("the first connection starts with new events, remembers the latest sequence and asks for one refetch", async () => {
    const { transport, session, delivered, resyncs, statuses } = setup();
    session.start();
    await settle();
    assert.equal(transport.opened.length, 1);
    assert.equal(transport.last.lastSequence, null);
    transport.last.handlers.connected(41);
    assert.deepEqual(resyncs, ["initial"]);
    assert.equal(session.lastSequence, 41);
    transport.last.handlers.message(frame(event(42)));
    transport.last.handlers.message(frame(event(43)));
    transport.last.handlers.message(frame(event(43)));
    assert.deepEqual(delivered, [42, 43]);
    assert.deepEqual(statuses, ["connecting", "live"]);
  });

  test("a dropped connection resumes with a new ticket and lastSequence; the replayed duplicates are dropped", async () => {
    const { clock, transport, session, delivered, resyncs } = setup();
    session.start();
    await settle();
    transport.last.handlers.connected(10);
    for (const n of [11, 12, 13]) transport.last.handlers.message(frame(event(n)));
    const first = transport.last;
    first.handlers.failed(null);
    assert.ok(first.closed, "the dropped stream is closed, not left to reconnect by itself");
    assert.equal(session.status, "reconnecting");
    clock.advance(RECONNECT_INITIAL_MS);
    await settle();
    assert.equal(transport.opened.length, 2);
    const second = transport.last;
    assert.notEqual(second.ticket, first.ticket, "a ticket is single-use: each connection gets its own");
    assert.equal(second.lastSequence, 13);
    second.handlers.connected(15);
    // The replay may start at or before what was delivered (another controller's buffer).
    for (const n of [12, 13, 14, 15]) second.handlers.message(frame(event(n)));
    assert.deepEqual(delivered, [11, 12, 13, 14, 15]);
    assert.deepEqual(resyncs, ["initial"], "a resumed connection needs no refetch");
    // Late frames of the old connection change nothing.
    first.handlers.message(frame(event(99)));
    first.handlers.failed(null);
    assert.deepEqual(delivered, [11, 12, 13, 14, 15]);
    assert.equal(transport.opened.length, 2);
  });

  test("a handed-over lastSequence is used on the very first connection, with no refetch", async () => {
    const { transport, session, resyncs } = setup(500);
    session.start();
    await settle();
    assert.equal(transport.last.lastSequence, 500);
    transport.last.handlers.connected(510);
    assert.deepEqual(resyncs, []);
  });

  test("RESYNC_REQUIRED asks for a refetch and moves to its latestSequence; later events continue from there", async () => {
    const { transport, session, delivered, resyncs } = setup(5);
    session.start();
    await settle();
    transport.last.handlers.connected(5000);
    transport.last.handlers.message(frame({ type: "RESYNC_REQUIRED", lastSequence: 5, earliestSequence: 2953, latestSequence: 5000, timestamp: "x" }));
    assert.deepEqual(resyncs, ["resync-required"]);
    assert.equal(session.lastSequence, 5000);
    transport.last.handlers.message(frame(event(4999)));
    transport.last.handlers.message(frame(event(5001)));
    assert.deepEqual(delivered, [5001]);
  });

  test("a gap in the sequence delivers the event and asks for a refetch", async () => {
    const { transport, session, delivered, resyncs } = setup(7);
    session.start();
    await settle();
    transport.last.handlers.connected(7);
    transport.last.handlers.message(frame(event(8)));
    transport.last.handlers.message(frame(event(11)));
    assert.deepEqual(delivered, [8, 11]);
    assert.deepEqual(resyncs, ["gap"]);
  });

  test("reconnects back off exponentially up to the bound; an expired ticket is replaced at once", async () => {
    const { clock, transport, session } = setup(1);
    session.start();
    await settle();
    const delays: number[] = [];
    for (let attempt = 0; attempt < 8; attempt++) {
      const before = transport.opened.length;
      const startedAt = clock.nowMs();
      transport.last.handlers.failed(null);
      while (transport.opened.length === before) {
        clock.advanceToNext();
        await settle();
      }
      delays.push(clock.nowMs() - startedAt);
    }
    for (let i = 1; i < delays.length; i++) assert.ok(delays[i] >= delays[i - 1], `delays grow: ${delays}`);
    assert.ok(Math.max(...delays) <= RECONNECT_MAX_MS, `bounded: ${delays}`);
    assert.equal(delays[0], Math.round(RECONNECT_INITIAL_MS * 0.75));
    // A successful connection resets the backoff; an Unauthorized frame (used ticket) retries at once.
    transport.last.handlers.connected(1);
    const before = transport.opened.length;
    transport.last.handlers.failed("Unauthorized");
    clock.advance(0);
    await settle();
    assert.equal(transport.opened.length, before + 1);
  });

  test("Too many connections waits the longest backoff and says so", async () => {
    const { clock, transport, session, statuses } = setup(1);
    session.start();
    await settle();
    transport.last.handlers.failed("Too many connections");
    assert.equal(statuses.at(-1), "full");
    clock.advance(RECONNECT_MAX_MS / 2 - 1);
    await settle();
    assert.equal(transport.opened.length, 1);
    clock.advance(RECONNECT_MAX_MS);
    await settle();
    assert.equal(transport.opened.length, 2);
  });

  test("a ticket refused with 403 stops (no permission: no retries); 401 means signed out; other failures retry", async () => {
    const denied = setup();
    denied.transport.failures = [403];
    denied.session.start();
    await settle();
    denied.clock.advance(60_000);
    await settle();
    assert.equal(denied.transport.opened.length, 0);
    assert.equal(denied.statuses.at(-1), "denied");

    const expired = setup();
    expired.transport.failures = [401];
    expired.session.start();
    await settle();
    assert.equal(expired.statuses.at(-1), "unauthorized");

    const flaky = setup();
    flaky.transport.failures = [503, 0];
    flaky.session.start();
    await settle();
    for (let i = 0; i < 4 && flaky.transport.opened.length === 0; i++) {
      flaky.clock.advanceToNext();
      await settle();
    }
    assert.equal(flaky.transport.opened.length, 1);
    assert.equal(flaky.transport.tickets, 1);
  });

  test("stop closes the stream and cancels a pending reconnect", async () => {
    const { clock, transport, session } = setup(1);
    session.start();
    await settle();
    transport.last.handlers.failed(null);
    session.stop();
    clock.advance(RECONNECT_MAX_MS * 2);
    await settle();
    assert.equal(transport.opened.length, 1);
    assert.equal(clock.pendingTimers(), 0);
  });
});

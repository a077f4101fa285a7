/**
 * The event stream hub's fan-out on a recording sink (the HTTP test, test/http/routes/events.test.ts,
 * covers the frames on a real server): frames coalesced into one write per client per turn of the
 * event loop, one shared chunk for clients at the same position, back-pressure without writes
 * while a socket is full, and the stall bound and keep-alive on the fake clock.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createEventBus, type ControllerEventBus } from "../../src/events/bus.js";
import { EVENT_JOURNAL_LOG, EventJournal } from "../../src/events/event-journal.js";
import { EVENT_STREAM_BATCH_EVENTS, EventStreamHub } from "../../src/events/event-stream.js";
import type { SseSink } from "../../src/shared/sse.js";
import { MemoryKvStore } from "../../src/store/memory/memory-kv-store.js";
import { FakeClock } from "../support/fake-clock.js";
import { eventually } from "../support/wait.js";

const silent = {
  name: "cloud.events.test",
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};

/** A sink that records every write; `full` makes writes report a full socket until `drain()`. */
class RecordingSink implements SseSink {
  readonly writes: (string | Uint8Array)[] = [];
  full = false;
  closed = false;
  cutCount = 0;
  private readonly drainListeners: (() => void)[] = [];
  private readonly closeListeners: (() => void)[] = [];

  write(chunk: string | Uint8Array): boolean {
    this.writes.push(chunk);
    return !this.full;
  }
  onDrain(listener: () => void): void {
    this.drainListeners.push(listener);
  }
  onClose(listener: () => void): void {
    this.closeListeners.push(listener);
  }
  end(): void {
    this.close();
  }
  cut(): void {
    this.cutCount++;
    this.close();
  }
  drain(): void {
    this.full = false;
    for (const listener of this.drainListeners) listener();
  }
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const listener of this.closeListeners) listener();
  }
  text(): string {
    return this.writes.map((w) => (typeof w === "string" ? w : Buffer.from(w).toString())).join("");
  }
  ids(): number[] {
    return [...this.text().matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
  }
}

describe("event stream hub", () => {
  let clock: FakeClock;
  let kv: MemoryKvStore;
  let bus: ControllerEventBus;
  let journal: EventJournal;
  let hub: EventStreamHub;

  before(async () => {
    clock = new FakeClock(Date.now());
    kv = new MemoryKvStore({ clock });
    bus = createEventBus({ logger: silent, clock });
    journal = new EventJournal({ kv, bus, logger: silent, clock });
    await journal.start();
    hub = new EventStreamHub({ journal, clock, keepAliveMs: 15_000, writeStallMs: 30_000 });
  });
  after(async () => {
    await journal.stop();
    await kv.close();
  });

  async function publish(count: number): Promise<number> {
    const last = journal.latestSequence + count;
    for (let i = 0; i < count; i++) bus.publish("TEST:PING", { i });
    await eventually(() => journal.latestSequence >= last, "events journaled");
    return last;
  }

  async function connect(sink: RecordingSink): Promise<void> {
    void hub.serve(sink, null);
    await eventually(() => sink.writes.length >= 1, "connected frame");
    // The client is handed to the fan-out on the turn after its connected frame.
    await new Promise((resolve) => setImmediate(resolve));
  }

  it("writes a burst of events to each client in one write per turn, the same bytes for clients at the same position", async () => {
    const a = new RecordingSink();
    const b = new RecordingSink();
    await connect(a);
    await connect(b);
    const first = journal.latestSequence + 1;
    const last = await publish(50);
    await eventually(() => a.ids().at(-1) === last && b.ids().at(-1) === last, "both clients have every event");
    assert.deepEqual(
      a.ids(),
      Array.from({ length: 50 }, (_, i) => first + i),
    );
    assert.deepEqual(b.ids(), a.ids());
    // connected, then the events coalesced: a write carries what the journal buffered since the last turn.
    assert.ok(a.writes.length - 1 < 50, `50 events came in ${a.writes.length - 1} writes`);
    const shared = a.writes.slice(1).filter((chunk) => b.writes.includes(chunk));
    assert.equal(shared.length, a.writes.length - 1, "the clients were handed the very same chunks");
    a.close();
    b.close();
    await eventually(() => hub.clientCount === 0, "clients released");
  });

  it("coalesces what arrived in one turn into one write, at most a batch of events per write", async () => {
    const sink = new RecordingSink();
    await connect(sink);
    const writesBefore = sink.writes.length;
    const count = EVENT_STREAM_BATCH_EVENTS * 2 + 10;
    const first = journal.latestSequence + 1;
    // Appended to the journal directly: every entry lands before the hub's next turn.
    for (let i = 0; i < count; i++)
      await kv.appendSequenced(EVENT_JOURNAL_LOG, JSON.stringify({ type: "TEST:PING", source: "t", timestamp: "x", data: { i } }));
    await eventually(() => sink.ids().at(-1) === first + count - 1, "every event");
    assert.equal(sink.writes.length - writesBefore, 3, "three writes: two full batches and the rest");
    assert.deepEqual(
      sink.ids(),
      Array.from({ length: count }, (_, i) => first + i),
    );
    sink.close();
    await eventually(() => hub.clientCount === 0, "client released");
  });

  it("writes nothing to a client whose socket is full until it drains, then goes on where it stopped; other clients do not wait", async () => {
    const slow = new RecordingSink();
    const fast = new RecordingSink();
    await connect(slow);
    await connect(fast);
    slow.full = true;
    const firstBatchEnd = await publish(5);
    await eventually(() => slow.ids().at(-1) === firstBatchEnd && fast.ids().at(-1) === firstBatchEnd, "the first events");
    const slowWrites = slow.writes.length;
    const last = await publish(20);
    await eventually(() => fast.ids().at(-1) === last, "the fast client has everything");
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(slow.writes.length, slowWrites, "no write while the socket is full");
    slow.drain();
    await eventually(() => slow.ids().at(-1) === last, "the slow client catches up after the drain");
    const ids = slow.ids();
    for (let i = 1; i < ids.length; i++) assert.equal(ids[i], ids[i - 1] + 1, "in order, without a gap");
    slow.close();
    fast.close();
    await eventually(() => hub.clientCount === 0, "clients released");
  });

  it("cuts a client whose socket took nothing for the stall bound, and only then", async () => {
    const sink = new RecordingSink();
    await connect(sink);
    sink.full = true;
    await publish(1);
    await eventually(() => sink.writes.length >= 2, "the event written into the full socket");
    clock.advance(29_999);
    assert.equal(sink.cutCount, 0);
    clock.advance(1);
    assert.equal(sink.cutCount, 1);
    assert.equal(hub.stalledClientsCut, 1);
    await eventually(() => hub.clientCount === 0, "the cut client's slot freed");
  });

  it("sends a keep-alive comment after the keep-alive interval without a write, not before", async () => {
    const sink = new RecordingSink();
    await connect(sink);
    const last = await publish(1);
    await eventually(() => sink.ids().at(-1) === last, "the event");
    clock.advance(14_999);
    assert.ok(!sink.text().includes(": keep-alive"));
    clock.advance(1);
    assert.ok(sink.text().endsWith(": keep-alive\n\n"));
    sink.close();
    await eventually(() => hub.clientCount === 0, "client released");
  });

  it("journal entries carry the event as {type, sequence, source, timestamp, data} JSON, made once, whatever the data or the writer", async () => {
    const data = { text: 'quote " backslash \\ line\n tab\t unicode é 😀 \u2028', nested: { list: [1, 2.5, -0, 1e21, null, true] }, empty: {} };
    bus.publish("TEST:TRICKY", data, "source-1");
    await eventually(() => journal.entry(journal.latestSequence)?.type === "TEST:TRICKY", "the event journaled");
    const entry = journal.entry(journal.latestSequence)!;
    const parsed = JSON.parse(entry.json) as { timestamp: string };
    assert.equal(entry.json, JSON.stringify({ type: "TEST:TRICKY", sequence: entry.sequence, source: "source-1", timestamp: parsed.timestamp, data }));
    assert.equal(entry.frame, `id: ${entry.sequence}\nevent: message\ndata: ${entry.json}\n\n`);
    // Another writer's layout (spaces, other keys, a missing field) is serialized field by field.
    for (const value of [
      '{ "type": "TEST:SPACED", "source": "x", "timestamp": "t", "data": {} }',
      '{"type":"TEST:EXTRA","source":"x","timestamp":"t","data":{},"more":1}',
      '{"type":"TEST:BARE"}',
    ]) {
      const sequence = await kv.appendSequenced(EVENT_JOURNAL_LOG, value);
      await eventually(() => journal.latestSequence >= sequence, "the entry journaled");
      const other = journal.entry(sequence)!;
      const fields = JSON.parse(value) as Record<string, unknown>;
      assert.equal(
        other.json,
        JSON.stringify({
          type: fields.type,
          sequence: other.sequence,
          source: fields.source ?? null,
          timestamp: fields.timestamp ?? null,
          data: fields.data ?? {},
        }),
      );
    }
  });
});

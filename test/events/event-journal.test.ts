/**
 * The cluster-wide event journal, over the memory store and a real Redis: one numbering for the
 * events of every controller, identical replay buffers, lost announcements read back from the log,
 * and a hole (the log no longer has what was missed) turned into a resync point instead of a gap.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { createEventBus, type ControllerEventBus } from "../../src/events/bus.js";
import { EventJournal } from "../../src/events/event-journal.js";
import { EventTypes } from "../../src/events/event-types.js";
import type { KvStore, SequencedLog } from "../../src/store/ports.js";
import { describeEachKv, recordingLogger, withEnv, type KvEnvironment } from "../coordination/support.js";
import { eventually } from "../support/wait.js";

/** A connection whose subscribers miss the announcements `drop` picks (a subscriber link that dropped). */
function lossy(inner: KvStore, drop: (message: string) => boolean): KvStore {
  return Object.assign(Object.create(inner) as KvStore, {
    subscribe: (channel: string, handler: (message: string) => void) => inner.subscribe(channel, (message) => (drop(message) ? undefined : handler(message))),
  });
}

interface Member {
  bus: ControllerEventBus;
  journal: EventJournal;
}

async function member(env: KvEnvironment, log: SequencedLog, kv?: KvStore, replayBufferEvents?: number): Promise<Member> {
  const { logger } = recordingLogger("cloud.events.test");
  const bus = createEventBus({ logger, clock: env.clock });
  const journal = new EventJournal({ kv: kv ?? (await env.connect()), bus, logger, clock: env.clock, log, replayBufferEvents, gapWaitMs: 50 });
  await journal.start();
  return { bus, journal };
}

const logFor = (env: KvEnvironment, entriesMax = 2048): SequencedLog => {
  const name = env.unique("journal");
  return { counterKey: `${name}:seq`, listKey: `${name}:log`, channel: `${name}:log`, entriesMax };
};

const bufferOf = (journal: EventJournal): string[] => {
  const out: string[] = [];
  for (let s = journal.earliestSequence; s <= journal.latestSequence; s++) out.push(journal.entry(s)?.json ?? "missing");
  return out;
};

describeEachKv("event journal", (makeEnv) => {
  it("numbers the events of every controller once and gives every controller the same buffer", () =>
    withEnv(makeEnv, async (env) => {
      const log = logFor(env);
      const a = await member(env, log);
      const b = await member(env, log);
      for (let i = 0; i < 20; i++) (i % 2 === 0 ? a : b).bus.publish("TEST:PING", { i });
      a.bus.publish(EventTypes.INSTANCE_CONSOLE_OUTPUT, { instanceId: "x", line: "never", timestampMs: 1 });
      b.bus.publish(EventTypes.GROUP_CREATED, { groupName: "bridged" }, "peer:a");
      await eventually(
        () => a.journal.latestSequence === 20 && b.journal.latestSequence === 20,
        () => `a ${a.journal.latestSequence}, b ${b.journal.latestSequence}`,
      );
      assert.deepEqual(bufferOf(a.journal), bufferOf(b.journal));
      const seen = bufferOf(a.journal).map((json) => JSON.parse(json));
      assert.deepEqual(
        seen.map((e) => e.sequence),
        Array.from({ length: 20 }, (_, i) => i + 1),
      );
      assert.deepEqual(
        seen.map((e) => e.data.i).sort((x, y) => x - y),
        Array.from({ length: 20 }, (_, i) => i),
      );
      assert.ok(
        seen.every((e) => e.type === "TEST:PING"),
        "neither console output nor a bridged event is journaled",
      );
      // A controller that starts later reads the same history from the log.
      const c = await member(env, log);
      assert.deepEqual(bufferOf(c.journal), bufferOf(a.journal));
      await Promise.all([a.journal.stop(), b.journal.stop(), c.journal.stop()]);
    }));

  it("reads announcements it missed back from the log, in order", () =>
    withEnv(makeEnv, async (env) => {
      const log = logFor(env);
      const a = await member(env, log);
      const missed = new Set(["2 ", "3 ", "5 "]);
      const b = await member(
        env,
        log,
        lossy(await env.connect(), (m) => [...missed].some((p) => m.startsWith(p))),
      );
      for (let i = 0; i < 6; i++) a.bus.publish("TEST:PING", { i });
      await eventually(
        () => b.journal.latestSequence === 6,
        () => `b at ${b.journal.latestSequence}`,
      );
      assert.deepEqual(bufferOf(b.journal), bufferOf(a.journal));
      assert.equal(b.journal.holeCount, 0);
      // The last announcement lost with nothing after it: the periodic catch-up read finds it.
      missed.add("7 ");
      a.bus.publish("TEST:PING", { i: 6 });
      await eventually(() => a.journal.latestSequence === 7, "a has 7");
      assert.equal(b.journal.latestSequence, 6);
      env.clock.advance(5_000);
      await eventually(
        () => b.journal.latestSequence === 7,
        () => `b at ${b.journal.latestSequence}`,
      );
      await Promise.all([a.journal.stop(), b.journal.stop()]);
    }));

  it("turns what the log no longer has into a resync point, never a silent gap", () =>
    withEnv(makeEnv, async (env) => {
      const log = logFor(env, 4);
      const a = await member(env, log, undefined, 4);
      let deaf = false;
      const b = await member(
        env,
        log,
        lossy(await env.connect(), () => deaf),
        4,
      );
      a.bus.publish("TEST:PING", { i: 0 });
      await eventually(() => b.journal.latestSequence === 1, "b has 1");
      deaf = true;
      for (let i = 1; i < 10; i++) a.bus.publish("TEST:PING", { i });
      await eventually(() => a.journal.latestSequence === 10, "a has 10");
      deaf = false;
      a.bus.publish("TEST:PING", { i: 10 });
      await eventually(
        () => b.journal.latestSequence === 11,
        () => `b at ${b.journal.latestSequence}`,
      );
      // 2..6 were trimmed from the log: b's buffer starts after them, so a client at 1 must resync.
      assert.equal(b.journal.holeCount, 1);
      assert.ok(b.journal.earliestSequence > 2, `earliest ${b.journal.earliestSequence}`);
      for (let s = b.journal.earliestSequence; s <= 11; s++) assert.equal(JSON.parse(b.journal.entry(s)!.json).sequence, s);
      await Promise.all([a.journal.stop(), b.journal.stop()]);
    }));
});

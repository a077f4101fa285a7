/**
 * GROUP_AGGREGATES_UPDATED: changes collected for the flush delay, one read per dirty group, an
 * event only when the aggregates changed, and reads that take long push the next flush out so they
 * never take more than 1/aggregatesReadShareMax of the time.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { createEventBus } from "../../src/events/bus.js";
import { EventTypes } from "../../src/events/event-types.js";
import type { CloudEvent } from "../../src/events/types.js";
import { aggregatesFlushDelayMs, aggregatesReadShareMax, GroupAggregatesPublisher } from "../../src/plugin-api/group-aggregates.js";
import { FakeClock } from "../support/fake-clock.js";

const silent = {
  name: "cloud.players.test",
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};

function setup(readMs: number) {
  const clock = new FakeClock(1_000_000);
  const bus = createEventBus({ logger: silent, clock });
  const reads: { group: string; atMs: number }[] = [];
  let running = 0;
  const instances = {
    getDoc: async () => null,
    aggregatesForGroup: async (group: string) => {
      reads.push({ group, atMs: clock.nowMs() });
      clock.advance(readMs); // the read takes this long
      return { runningInstances: ++running, totalPlayers: 0 };
    },
  };
  const published: CloudEvent[] = [];
  bus.subscribe(EventTypes.GROUP_AGGREGATES_UPDATED, (event) => void published.push(event));
  const publisher = new GroupAggregatesPublisher(instances, bus, clock, silent);
  return { clock, bus, reads, published, publisher };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

it("reads each dirty group once per flush, after the flush delay", async () => {
  const { clock, bus, reads, published, publisher } = setup(0);
  for (let i = 0; i < 50; i++) publisher.groupChanged(i % 2 === 0 ? "lobby" : "game");
  clock.advance(aggregatesFlushDelayMs - 1);
  await settle();
  assert.equal(reads.length, 0);
  clock.advance(1);
  await settle();
  await bus.flush();
  assert.deepEqual(reads.map((r) => r.group).sort(), ["game", "lobby"]);
  assert.equal(published.length, 2);
  await publisher.stop();
});

it("after a flush whose reads took t ms the next one starts no sooner than t × aggregatesReadShareMax after the last began", async () => {
  const readMs = 100;
  const { clock, reads, publisher } = setup(readMs);
  publisher.groupChanged("lobby");
  clock.advance(aggregatesFlushDelayMs);
  await settle();
  assert.equal(reads.length, 1);
  const firstAtMs = reads[0]!.atMs;
  publisher.groupChanged("lobby");
  for (let step = 0; step < 40 && reads.length < 2; step++) {
    clock.advance(aggregatesFlushDelayMs);
    await settle();
  }
  assert.equal(reads.length, 2);
  assert.ok(reads[1]!.atMs - firstAtMs >= readMs * aggregatesReadShareMax, `second read ${reads[1]!.atMs - firstAtMs} ms after the first`);
  assert.ok(reads[1]!.atMs - firstAtMs < readMs * aggregatesReadShareMax + 2 * aggregatesFlushDelayMs, "and not much later");
  await publisher.stop();
});

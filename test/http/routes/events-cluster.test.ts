/**
 * The event stream across two controllers sharing one real Redis (two in-process apps, each with
 * its own HTTP server, document store and bus): both publish, a client streams from one, and
 * reconnects to the other with its last sequence (query, then Last-Event-ID) while events keep
 * coming. Every event must arrive exactly once, in sequence order, with no gap.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { openRedisKvStore } from "../../../src/store/redis/redis-kv-store.js";
import type { KvStore } from "../../../src/store/ports.js";
import { startTestApp, type TestApp } from "../../support/http-app.js";
import { startRedisServer, type RedisServer } from "../../support/redis-server.js";
import { frameJson, isMessage, openSse, type SseStream } from "../../support/sse-client.js";
import { eventually } from "../../support/wait.js";

describe("event stream over two controllers sharing Redis", () => {
  let redis: RedisServer;
  const stores: KvStore[] = [];
  const apps: TestApp[] = [];
  const streams: SseStream[] = [];

  before(async () => {
    redis = await startRedisServer();
    for (let i = 0; i < 2; i++) {
      const kv = await openRedisKvStore({ uri: redis.uri });
      stores.push(kv);
      apps.push(await startTestApp({ kv }));
    }
    // Each app has its own document store: the stream checks the ticket's user where it is redeemed.
    for (const app of apps) await app.tokenFor("VIEWER");
  });
  after(async () => {
    for (const stream of streams) stream.close();
    for (const app of apps) await app.close();
    for (const kv of stores) await kv.close();
    await redis?.stop();
  });

  async function ticketFrom(app: TestApp): Promise<string> {
    const res = await app.request("POST", "/api/v1/events/ticket", { token: await app.tokenFor("VIEWER") });
    assert.equal(res.status, 200, res.text);
    return res.json.ticket;
  }

  async function stream(app: TestApp, ticket: string, query: Record<string, string> = {}, headers: Record<string, string> = {}): Promise<SseStream> {
    const s = await openSse(`${app.baseUrl}/api/v1/events/stream?${new URLSearchParams({ ticket, ...query })}`, headers);
    streams.push(s);
    return s;
  }

  it("redeems a ticket issued by the other controller, once", async () => {
    const [a, b] = apps;
    const ticket = await ticketFrom(a);
    const onB = await stream(b, ticket);
    assert.equal((await onB.waitFor(1))[0].event, "connected");
    onB.close();
    const again = await stream(a, ticket);
    await again.ended;
    assert.deepEqual(frameJson(again.frames[0]), { message: "Unauthorized" });
  });

  it("resumes on the other controller with no gap and no duplicate while both publish", async () => {
    const [a, b] = apps;
    const start = a.eventStream.journal.latestSequence;
    let published = 0;
    let publishing = true;
    // Both controllers publish, alternating, about one event per millisecond.
    const publisher = (async () => {
      while (publishing) {
        (published % 2 === 0 ? a : b).events.publish("TEST:TICK", { n: published });
        published++;
        await new Promise((resolve) => setTimeout(resolve, 1));
      }
    })();

    const received: number[] = [];
    const take = (s: SseStream) => s.frames.filter(isMessage).map((f) => frameJson(f));
    // Leg 1 on A, leg 2 on B (lastSequence), leg 3 on A again (Last-Event-ID).
    const first = await stream(a, await ticketFrom(a), { lastSequence: String(start) });
    await first.waitFor(200, isMessage);
    first.close();
    for (const event of take(first)) received.push(event.sequence);
    const second = await stream(b, await ticketFrom(b), { lastSequence: String(received.at(-1)) });
    await second.waitFor(200, isMessage);
    second.close();
    for (const event of take(second)) received.push(event.sequence);
    const third = await stream(a, await ticketFrom(a), {}, { "last-event-id": String(received.at(-1)) });
    await third.waitFor(200, isMessage);
    publishing = false;
    await publisher;
    const lastPublished = start + published;
    await eventually(
      () => take(third).at(-1)?.sequence === lastPublished,
      () => `third at ${take(third).at(-1)?.sequence} of ${lastPublished}`,
    );
    third.close();
    for (const event of take(third)) received.push(event.sequence);

    for (const s of [first, second, third]) assert.ok(!take(s).some((e) => e.type === "RESYNC_REQUIRED"), "no resync was needed");
    assert.deepEqual(
      received,
      Array.from({ length: published }, (_, i) => start + 1 + i),
      "every sequence once, in order",
    );
    // The same sequence means the same event on both controllers.
    for (const sequence of [start + 1, start + Math.floor(published / 2), lastPublished]) {
      assert.equal(a.eventStream.journal.entry(sequence)?.json, b.eventStream.journal.entry(sequence)?.json);
    }
    const sources = new Set([...take(first), ...take(second), ...take(third)].map((e) => e.data.n % 2));
    assert.deepEqual([...sources].sort(), [0, 1], "events of both controllers arrived");
  });
});

/**
 * The event stream on a real server (spec document 3, "Event stream"): tickets, frames, replay,
 * resync, the client cap, keep-alive, a slow client, and bad input. The app runs on a fake clock
 * (started at the real time) so ticket expiry, keep-alive and the stall bound are reached by
 * advancing it.
 */
import assert from "node:assert/strict";
import { connect, type Socket } from "node:net";
import { after, before, describe, it } from "node:test";
import { EventTypes } from "../../../src/events/event-types.js";
import { REPLAY_BUFFER_EVENTS } from "../../../src/events/event-journal.js";
import { FakeClock } from "../../support/fake-clock.js";
import { startTestApp, type TestApp } from "../../support/http-app.js";
import { frameJson, isMessage, openSse, type SseStream } from "../../support/sse-client.js";
import { eventually } from "../../support/wait.js";

describe("event stream", () => {
  let t: TestApp;
  let clock: FakeClock;
  let token: string;
  const streams: SseStream[] = [];

  before(async () => {
    clock = new FakeClock(Date.now());
    t = await startTestApp({ clock });
    token = await t.tokenFor("VIEWER");
  });
  after(async () => {
    for (const stream of streams) stream.close();
    await t.close();
  });

  async function ticket(): Promise<string> {
    const res = await t.request("POST", "/api/v1/events/ticket", { token });
    assert.equal(res.status, 200, res.text);
    return res.json.ticket as string;
  }

  async function open(query: Record<string, string> = {}, headers: Record<string, string> = {}): Promise<SseStream> {
    const params = new URLSearchParams({ ticket: await ticket(), ...query });
    const stream = await openSse(`${t.baseUrl}/api/v1/events/stream?${params}`, headers);
    streams.push(stream);
    return stream;
  }

  /** Publishes `count` custom events and waits until the journal has them; returns their sequences. */
  async function publish(count: number, type = "TEST:PING", data: (i: number) => Record<string, unknown> = (i) => ({ i })): Promise<number[]> {
    const first = t.eventStream.journal.latestSequence + 1;
    for (let i = 0; i < count; i++) t.events.publish(type, data(i));
    const j = t.eventStream.journal;
    await eventually(
      () => j.latestSequence >= first + count - 1,
      () =>
        `events journaled: latest ${j.latestSequence} of ${first + count - 1}, buffered ${j.bufferedEvents}, failed ${j.failedEvents}, pending ${t.events.pendingEvents}, dropped ${t.events.droppedEvents}`,
    );
    return Array.from({ length: count }, (_, i) => first + i);
  }

  it("issues tickets to signed-in users only: 24 random bytes, URL-safe base64 without padding, 30 s", async () => {
    const anonymous = await t.request("POST", "/api/v1/events/ticket");
    assert.equal(anonymous.status, 401);
    assert.equal(anonymous.json.error.code, "UNAUTHORIZED");
    const res = await t.request("POST", "/api/v1/events/ticket", { token });
    assert.equal(res.status, 200);
    assert.match(res.json.ticket, /^[A-Za-z0-9_-]{32}$/);
    assert.equal(Buffer.from(res.json.ticket, "base64url").length, 24);
    assert.equal(Date.parse(res.json.expiresAt), clock.nowMs() + 30_000);
  });

  it("refuses a missing, unknown, used or expired ticket with an error event Unauthorized, then closes", async () => {
    const cases: string[] = ["", "?ticket=", `?ticket=${"A".repeat(32)}`, "?ticket=short"];
    const used = await ticket();
    const first = await openSse(`${t.baseUrl}/api/v1/events/stream?ticket=${used}`);
    await first.waitFor(1, (f) => f.event === "connected");
    first.close();
    cases.push(`?ticket=${used}`);
    const expired = await ticket();
    clock.advance(30_001);
    cases.push(`?ticket=${expired}`);
    for (const query of cases) {
      const stream = await openSse(`${t.baseUrl}/api/v1/events/stream${query}`);
      await stream.ended;
      assert.equal(stream.frames.length, 1, query);
      assert.equal(stream.frames[0].event, "error");
      assert.deepEqual(frameJson(stream.frames[0]), { message: "Unauthorized" });
    }
  });

  it("sends connected first, then every event but console output as message frames with id = sequence; custom events need no wiring", async () => {
    const before = t.eventStream.journal.latestSequence;
    const stream = await open();
    const [connected] = await stream.waitFor(1);
    assert.equal(connected.event, "connected");
    const hello = frameJson(connected);
    assert.equal(hello.latestSequence, before);
    assert.equal(typeof hello.message, "string");

    t.events.publish(EventTypes.GROUP_CREATED, { groupName: "lobby" });
    t.events.publish(EventTypes.INSTANCE_CONSOLE_OUTPUT, { instanceId: "lobby-1", line: "secret", timestampMs: 1 });
    t.events.publish("SHOP:PURCHASE", { item: "sword" }, "lobby-1");
    const messages = await stream.waitFor(2, isMessage);
    const [group, custom] = messages.map(frameJson);
    assert.equal(group.type, "GROUP_CREATED");
    assert.equal(group.sequence, before + 1);
    assert.deepEqual(group.data, { groupName: "lobby" });
    assert.equal(group.source, "controller");
    assert.ok(!Number.isNaN(Date.parse(group.timestamp)));
    assert.deepEqual(
      messages.map((m) => m.id),
      [String(before + 1), String(before + 2)],
    );
    assert.equal(custom.type, "SHOP:PURCHASE");
    assert.equal(custom.source, "lobby-1");
    assert.deepEqual(custom.data, { item: "sword" });
    // The console line was published between the two and never reached the stream or the journal.
    await publish(1);
    await stream.waitFor(3, isMessage);
    assert.ok(!stream.frames.some((f) => f.data.includes("secret") || f.data.includes("INSTANCE_CONSOLE_OUTPUT")));
  });

  it("replays after lastSequence or Last-Event-ID (the query wins), in order and without duplicates", async () => {
    const sequences = await publish(5);
    const fromQuery = await open({ lastSequence: String(sequences[1]) });
    const replayed = await fromQuery.waitFor(3, isMessage);
    assert.deepEqual(
      replayed.map((f) => Number(f.id)),
      sequences.slice(2),
    );
    const fromHeader = await open({}, { "last-event-id": String(sequences[3]) });
    assert.deepEqual(
      (await fromHeader.waitFor(1, isMessage)).map((f) => frameJson(f).sequence),
      [sequences[4]],
    );
    const bothGiven = await open({ lastSequence: String(sequences[2]) }, { "last-event-id": String(sequences[4]) });
    assert.deepEqual(
      (await bothGiven.waitFor(2, isMessage)).map((f) => Number(f.id)),
      sequences.slice(3),
    );
    const live = await publish(1);
    for (const stream of [fromQuery, fromHeader, bothGiven]) {
      const ids = (await stream.waitFor(1, (f) => isMessage(f) && Number(f.id) === live[0])).length;
      assert.equal(ids, 1);
      const all = stream.frames.filter(isMessage).map((f) => Number(f.id));
      assert.deepEqual(
        all,
        [...new Set(all)].sort((a, b) => a - b),
        "ascending, no duplicates",
      );
    }
  });

  it("answers bad positions with the error envelope and leaves the ticket unused", async () => {
    for (const [query, header] of [["-1"], ["abc"], ["1.5"], ["1e3"], ["9".repeat(16)], [" 1"], [undefined, "x"], [undefined, "-3"]] as [
      string | undefined,
      string?,
    ][]) {
      const good = await ticket();
      const params = new URLSearchParams({ ticket: good });
      if (query !== undefined) params.set("lastSequence", query);
      const res = await fetch(`${t.baseUrl}/api/v1/events/stream?${params}`, { headers: header ? { "last-event-id": header } : {} });
      assert.equal(res.status, 422, `${query} ${header}`);
      const body = (await res.json()) as { error: { code: string; message: string; status: number } };
      assert.equal(body.error.code, "VALIDATION_ERROR");
      assert.equal(body.error.status, 422);
      assert.match(body.error.message, query !== undefined ? /lastSequence/ : /Last-Event-ID/);
      const stream = await openSse(`${t.baseUrl}/api/v1/events/stream?ticket=${good}`);
      streams.push(stream);
      assert.equal((await stream.waitFor(1))[0].event, "connected", "the ticket still works");
      stream.close();
    }
  });

  it("sends one RESYNC_REQUIRED for a position older than the buffer or beyond the latest, then goes on live", async () => {
    await publish(REPLAY_BUFFER_EVENTS + 10);
    const journal = t.eventStream.journal;
    assert.equal(journal.bufferedEvents, REPLAY_BUFFER_EVENTS);
    const metrics = await t.request("GET", "/metrics");
    assert.match(metrics.text, new RegExp(`^cloud_sse_replay_buffer_size ${REPLAY_BUFFER_EVENTS}$`, "m"));
    for (const position of [0, journal.earliestSequence - 2, journal.latestSequence + 1000]) {
      const earliest = journal.earliestSequence;
      const latest = journal.latestSequence;
      const stream = await open({ lastSequence: String(position) });
      const [resync] = await stream.waitFor(1, isMessage);
      const body = frameJson(resync);
      assert.equal(body.type, "RESYNC_REQUIRED");
      assert.equal(body.lastSequence, position);
      assert.equal(body.earliestSequence, earliest);
      assert.equal(body.latestSequence, latest);
      assert.equal(Date.parse(body.timestamp), clock.nowMs());
      assert.equal(resync.id, String(latest));
      const [live] = await publish(1);
      const after = await stream.waitFor(2, isMessage);
      assert.equal(frameJson(after[1]).sequence, live, "the stream goes on after the resync, without replaying");
      stream.close();
    }
    // The oldest buffered position itself is still replayable: no resync.
    const earliest = journal.earliestSequence;
    const edge = await open({ lastSequence: String(earliest - 1) });
    const first = (await edge.waitFor(1, isMessage))[0];
    assert.equal(frameJson(first).sequence, earliest);
    edge.close();
  });

  it("sends a keep-alive comment when the stream is idle", async () => {
    const stream = await open();
    await stream.waitFor(1);
    await eventually(() => t.eventStream.hub.clientCount > 0, "the client streaming");
    clock.advance(15_000);
    const [comment] = await stream.waitFor(1, (f) => f.comment !== undefined);
    assert.equal(comment.comment, "keep-alive");
    stream.close();
  });

  it("refuses the 101st concurrent client with Too many connections and admits one again after a client left", async () => {
    for (const stream of streams.splice(0)) stream.close();
    await eventually(
      () => t.eventStream.hub.clientCount === 0,
      () => `0 clients, not ${t.eventStream.hub.clientCount}`,
    );
    const open100 = await Promise.all(Array.from({ length: 100 }, () => open()));
    await Promise.all(open100.map((s) => s.waitFor(1, (f) => f.event === "connected")));
    const metrics = await t.request("GET", "/metrics");
    assert.match(metrics.text, /^cloud_sse_clients_connected 100$/m);
    const refused = await open();
    await refused.ended;
    assert.deepEqual(
      refused.frames.map((f) => [f.event, frameJson(f)]),
      [["error", { message: "Too many connections" }]],
    );
    open100[0].close();
    await eventually(
      () => t.eventStream.hub.clientCount === 99,
      () => `99 clients, not ${t.eventStream.hub.clientCount}`,
    );
    const admitted = await open();
    assert.equal((await admitted.waitFor(1))[0].event, "connected");
    for (const stream of streams.splice(0)) stream.close();
    await eventually(
      () => t.eventStream.hub.clientCount === 0,
      () => `0 clients, not ${t.eventStream.hub.clientCount}`,
    );
  });

  it("a client that does not read holds up no one, costs no queue, and is cut after the stall bound", async () => {
    const slow = await rawStream(t.baseUrl, await ticket());
    const fast = await open();
    await fast.waitFor(1);
    await eventually(
      () => t.eventStream.hub.clientCount === 2,
      () => `2 clients, not ${t.eventStream.hub.clientCount}`,
    );
    const big = "x".repeat(4_000);
    // In rounds the fast client keeps up with; the slow one falls behind by far more than the buffer.
    const sequences: number[] = [];
    for (let round = 0; round < 12; round++) {
      sequences.push(...(await publish(REPLAY_BUFFER_EVENTS / 4, "TEST:BIG", (i) => ({ i, big }))));
      await fast.waitFor(sequences.length, isMessage, 30_000);
    }
    const got = fast.frames.filter(isMessage);
    assert.deepEqual(
      got.map((f) => Number(f.id)),
      sequences,
    );
    // 24 MB went to the fast client; the slow one, which read nothing, is still parked on a write.
    const heapMb = process.memoryUsage().heapUsed / 2 ** 20;
    assert.equal(t.eventStream.hub.clientCount, 2);
    assert.ok(heapMb < 1024, `heap ${heapMb} MB`);
    clock.advance(30_000);
    await eventually(() => t.eventStream.hub.clientCount === 1, "the stalled client cut");
    assert.equal(t.eventStream.hub.stalledClientsCut, 1);
    // What the slow client's socket got before the cut is a prefix in order: never a silent gap.
    const text = await slow.readAll();
    const ids = [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
    for (let i = 1; i < ids.length; i++) assert.equal(ids[i], ids[i - 1] + 1);
    assert.ok(ids.length < sequences.length, `the slow client got ${ids.length} events`);
    fast.close();
  });
});

/** A stream on a raw socket that reads nothing until `readAll`. */
async function rawStream(baseUrl: string, ticket: string): Promise<{ socket: Socket; readAll(): Promise<string> }> {
  const url = new URL(baseUrl);
  const socket = connect({ host: url.hostname, port: Number(url.port) });
  await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
  socket.write(`GET /api/v1/events/stream?ticket=${ticket} HTTP/1.1\r\nHost: ${url.host}\r\nAccept: text/event-stream\r\n\r\n`);
  socket.pause();
  return {
    socket,
    readAll: () =>
      new Promise<string>((resolve) => {
        const chunks: Buffer[] = [];
        socket.on("data", (chunk: Buffer) => chunks.push(chunk));
        socket.once("close", () => resolve(Buffer.concat(chunks).toString()));
        socket.once("error", () => undefined);
        socket.resume();
      }),
  };
}

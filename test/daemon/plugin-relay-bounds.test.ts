// The relay's memory is bounded in total (docs/decisions/plugin-relay.md, "Bounds"): a cap on
// connections, answered with a clear 503 in the error envelope beyond it, and a budget of request
// body bytes held for all requests together (a body is held so it can be sent again; while no
// controller is reachable every waiting request holds its body). Requests that would go beyond the
// budget are refused with 503 RELAY_BUSY; the bytes held never exceed it, and once a controller
// takes the waiting requests the budget is free again. Real sockets against a relay that knows no
// controller until the end.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { connect, type Socket } from "node:net";
import { after, before, describe, it } from "node:test";
import { PluginRelay, RELAY_ERROR_CODES } from "../../src/daemon/plugin-relay.js";
import { eventually } from "../support/wait.js";

const CONNECTIONS_MAX = 8;
const BUFFERED_BYTES_MAX = 256 * 1024;
const REPLAY_BODY_BYTES_MAX = 96 * 1024;

/** A raw connection: what it received, and whether the relay closed it. */
interface RawClient {
  socket: Socket;
  received(): string;
  closed: Promise<void>;
}

async function open(port: number): Promise<RawClient> {
  const socket = connect(port, "127.0.0.1");
  let text = "";
  socket.setEncoding("utf8");
  socket.on("data", (chunk: string) => (text += chunk));
  socket.on("error", () => undefined);
  const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
  await new Promise<void>((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("error", reject);
  });
  return { socket, received: () => text, closed };
}

/** Starts a POST with a declared body of `declaredBytes` and sends `sentBytes` of it. */
function post(client: RawClient, declaredBytes: number, sentBytes: number): void {
  client.socket.write(`POST /api/plugin/events HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\nContent-Length: ${declaredBytes}\r\n\r\n`);
  client.socket.write(Buffer.alloc(sentBytes, 0x61));
}

const statusOf = (text: string): number => Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);

describe("the relay's memory is bounded in total", { timeout: 120_000 }, () => {
  let relay: PluginRelay;
  let port: number;
  const clients: RawClient[] = [];
  let peakBytes = 0;
  let sampler: NodeJS.Timeout;

  before(async () => {
    // No controller is ever known: every request waits, holding its body.
    relay = new PluginRelay({
      port: 0,
      waitMs: 60_000,
      waitingRequestsMax: 1_000,
      replayBodyBytesMax: REPLAY_BODY_BYTES_MAX,
      connectionsMax: CONNECTIONS_MAX,
      bufferedBytesMax: BUFFERED_BYTES_MAX,
    });
    await relay.start();
    port = Number(new URL(relay.url!).port);
    sampler = setInterval(() => (peakBytes = Math.max(peakBytes, relay.bufferedBytes)), 1);
  });
  after(async () => {
    clearInterval(sampler);
    for (const client of clients) client.socket.destroy();
    await relay?.close();
  });

  it("refuses the connection beyond the cap with a clear 503, and takes one again after a connection left", async () => {
    for (let i = 0; i < CONNECTIONS_MAX; i++) clients.push(await open(port));
    await eventually(
      () => relay.connections === CONNECTIONS_MAX,
      () => `${CONNECTIONS_MAX} connections (have ${relay.connections})`,
    );
    const extra = await open(port);
    await extra.closed;
    assert.equal(statusOf(extra.received()), 503, extra.received());
    const body = JSON.parse(extra.received().slice(extra.received().indexOf("\r\n\r\n") + 4)) as { error: { code: string; message: string; status: number } };
    assert.equal(body.error.code, RELAY_ERROR_CODES.busy);
    assert.equal(body.error.status, 503);
    assert.match(body.error.message, new RegExp(`${CONNECTIONS_MAX} connections`));

    clients.pop()!.socket.destroy();
    await eventually(() => relay.connections === CONNECTIONS_MAX - 1, "a connection left");
    clients.push(await open(port));
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.ok(!clients.at(-1)!.socket.destroyed, "the relay kept the new connection");
  });

  it("holds at most its budget of body bytes for all waiting requests together; the rest are refused with 503", async () => {
    // Every connection sends a body larger than a request may hold for a replay: each would hold its bound.
    for (const client of clients) post(client, 4 * REPLAY_BODY_BYTES_MAX, 2 * REPLAY_BODY_BYTES_MAX);
    const admitted = Math.floor(BUFFERED_BYTES_MAX / REPLAY_BODY_BYTES_MAX);
    await eventually(
      () => clients.filter((c) => statusOf(c.received()) === 503).length >= CONNECTIONS_MAX - admitted - 1,
      () => `requests beyond the budget refused (statuses ${clients.map((c) => statusOf(c.received())).join(",")}, held ${relay.bufferedBytes})`,
    );
    assert.ok(relay.bufferedBytes <= BUFFERED_BYTES_MAX, `held ${relay.bufferedBytes} bytes`);
    assert.ok(peakBytes <= BUFFERED_BYTES_MAX, `peak ${peakBytes} bytes`);
    assert.ok(relay.bufferedBytesPeak <= BUFFERED_BYTES_MAX, `the relay's own peak ${relay.bufferedBytesPeak}`);
    const refused = clients.filter((c) => statusOf(c.received()) === 503);
    for (const client of refused) assert.match(client.received(), new RegExp(RELAY_ERROR_CODES.busy));
    assert.ok(relay.waitingRequests <= admitted + 1, `waiting ${relay.waitingRequests}`);

    // A controller comes: the waiting requests go to it (a body beyond the replay bound is no longer
    // held once it is under way), their answers come, and the budget is free again.
    const controller = createServer((req, res) => {
      req.resume();
      req.on("end", () => res.writeHead(200, { "content-type": "application/json" }).end("{}"));
    });
    await new Promise<void>((resolve) => controller.listen(0, "127.0.0.1", resolve));
    try {
      relay.sessionOpened(`http://127.0.0.1:${(controller.address() as { port: number }).port}`);
      const waiting = clients.filter((c) => statusOf(c.received()) === 0);
      for (const client of waiting) client.socket.write(Buffer.alloc(2 * REPLAY_BODY_BYTES_MAX, 0x61));
      await eventually(() => waiting.every((c) => statusOf(c.received()) === 200), "the waiting requests answered by the controller");
      await eventually(
        () => relay.bufferedBytes === 0,
        () => `released (held ${relay.bufferedBytes})`,
      );
      for (const client of clients.splice(0)) client.socket.destroy();
      await eventually(
        () => relay.connections === 0,
        () => `connections closed (${relay.connections} open)`,
      );
    } finally {
      await new Promise<void>((resolve) => controller.close(() => resolve()));
    }
  });
});

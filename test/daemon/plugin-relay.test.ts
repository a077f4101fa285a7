// The daemon's plugin relay against real HTTP servers on ephemeral loopback ports standing in for
// two controllers: what is forwarded (method, path, headers, body, status, response headers), the
// streaming of bodies both ways (an event stream arrives event by event), the 404 for anything but
// /api/plugin/*, the switch to the next session's controller after a refused connection, the wait
// and queue bounds (503), a request cut after it was sent (502, never sent again), and the shutdown.
// Every server and relay a test starts is closed in afterEach.
import assert from "node:assert/strict";
import { createServer, request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { afterEach, describe, it } from "node:test";
import { parseDaemonConfig } from "../../src/daemon/config.js";
import { PluginRelay, pluginPathOf, type PluginRelayOptions } from "../../src/daemon/plugin-relay.js";
import { FakeClock } from "../support/fake-clock.js";
import { eventually } from "../support/wait.js";

interface Received {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  rawHeaders: string[];
  body: string;
}

type Handler = (req: IncomingMessage, res: ServerResponse, body: Promise<string>) => void;

/** A stand-in controller: records every request; answers 200 `{"ok":true}` unless told otherwise. */
class StandInController {
  readonly received: Received[] = [];
  handler: Handler = (_req, res, body) => void body.then(() => res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}'));
  private constructor(
    readonly server: Server,
    readonly url: string,
  ) {}

  static async start(): Promise<StandInController> {
    let self: StandInController | null = null;
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      const entry: Received = { method: req.method ?? "", url: req.url ?? "", headers: req.headers, rawHeaders: req.rawHeaders, body: "" };
      self!.received.push(entry);
      const body = new Promise<string>((resolve) => {
        req.on("data", (c: Buffer) => {
          chunks.push(c);
          entry.body = Buffer.concat(chunks).toString();
        });
        req.on("end", () => resolve(entry.body));
      });
      self!.handler(req, res, body);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    self = new StandInController(server, `http://127.0.0.1:${(server.address() as { port: number }).port}`);
    return self;
  }

  /** Stops listening: the next connection is refused. */
  async close(): Promise<void> {
    if (!this.server.listening) return;
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    await closed;
  }
}

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** One request to the relay on a fresh connection. */
function call(base: string, path: string, options: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${base}${path}`, { method: options.method ?? "POST", headers: options.headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString() }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(options.body);
  });
}

function envelopeOf(answer: Answer): { code: string; message: string; status: number } {
  assert.match(String(answer.headers["content-type"]), /^application\/json/);
  const parsed = JSON.parse(answer.body) as { error: { code: string; message: string; status: number } };
  assert.equal(parsed.error.status, answer.status);
  assert.equal(typeof parsed.error.message, "string");
  return parsed.error;
}

describe("plugin relay", { timeout: 60_000 }, () => {
  const cleanups: (() => Promise<void>)[] = [];

  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  const controller = async () => {
    const c = await StandInController.start();
    cleanups.push(() => c.close());
    return c;
  };
  const relayWith = async (overrides: Partial<PluginRelayOptions> = {}) => {
    const relay = new PluginRelay({ port: 0, waitMs: 20_000, waitingRequestsMax: 100, replayBodyBytesMax: 64 * 1024, ...overrides });
    await relay.start();
    cleanups.push(() => relay.close());
    return relay;
  };

  it("forwards method, path and query, headers and body; answers with the controller's status, headers and body", async () => {
    const a = await controller();
    a.handler = (_req, res, body) =>
      void body.then((text) =>
        res
          .writeHead(201, "Made", { "content-type": "application/json", "x-controller": "a", "set-cookie": ["one=1", "two=2"] })
          .end(JSON.stringify({ echoed: text })),
      );
    const relay = await relayWith();
    relay.sessionOpened(a.url);
    assert.match(relay.url!, /^http:\/\/127\.0\.0\.1:\d+$/);

    const answer = await call(relay.url!, "/api/plugin/player-join?probe=1", {
      headers: {
        Authorization: "Bearer wl.token",
        traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "X-Cloud-Sequence": "42",
        "Content-Type": "application/json",
        "X-Forwarded-For": "10.9.8.7",
        Connection: "keep-alive, x-hop",
        "X-Hop": "dropped",
      },
      body: '{"uuid":"u","name":"Steve"}',
    });
    assert.equal(answer.status, 201);
    assert.equal(answer.headers["x-controller"], "a");
    assert.deepEqual(answer.headers["set-cookie"], ["one=1", "two=2"]);
    assert.deepEqual(JSON.parse(answer.body), { echoed: '{"uuid":"u","name":"Steve"}' });

    assert.equal(a.received.length, 1);
    const seen = a.received[0]!;
    assert.equal(seen.method, "POST");
    assert.equal(seen.url, "/api/plugin/player-join?probe=1");
    assert.equal(seen.headers.authorization, "Bearer wl.token");
    assert.equal(seen.headers.traceparent, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    assert.equal(seen.headers["x-cloud-sequence"], "42");
    assert.equal(seen.headers["content-type"], "application/json");
    assert.equal(seen.headers["x-forwarded-for"], "10.9.8.7, 127.0.0.1");
    assert.equal(seen.headers.host, new URL(a.url).host);
    assert.equal(seen.headers["x-hop"], undefined, "a header the Connection header names is not forwarded");
    assert.ok(seen.rawHeaders.includes("X-Cloud-Sequence"), "header names keep their spelling");

    const get = await call(relay.url!, "/api/plugin/groups", { method: "GET" });
    assert.equal(get.status, 201);
    assert.deepEqual(JSON.parse(get.body), { echoed: "" });
    assert.equal(a.received[1]!.method, "GET");
    assert.equal(a.received[1]!.headers["x-forwarded-for"], "127.0.0.1");
    assert.equal(a.received[1]!.body, "");
  });

  it("passes an error status through as the controller wrote it", async () => {
    const a = await controller();
    a.handler = (_req, res) => res.writeHead(401, { "content-type": "application/json" }).end('{"error":{"code":"UNAUTHORIZED","message":"no","status":401}}');
    const relay = await relayWith();
    relay.sessionOpened(a.url);
    const answer = await call(relay.url!, "/api/plugin/ready", { body: "{}" });
    assert.equal(answer.status, 401);
    assert.equal(envelopeOf(answer).code, "UNAUTHORIZED");
  });

  it("streams both ways: the controller reads the request body before it ends, the client gets each event as it is sent", async () => {
    const a = await controller();
    let controllerResponse: ServerResponse | null = null;
    a.handler = (req, res) => {
      controllerResponse = res;
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      res.write("event: connected\ndata: {}\n\n");
      req.resume();
    };
    const relay = await relayWith();
    relay.sessionOpened(a.url);

    const events: string[] = [];
    let ended = false;
    const req = httpRequest(`${relay.url}/api/plugin/events/stream`, { method: "POST", agent: false, headers: { "content-type": "text/plain" } }, (res) => {
      assert.equal(res.headers["content-type"], "text/event-stream");
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => events.push(chunk));
      res.on("end", () => (ended = true));
    });
    cleanups.push(async () => void req.destroy());
    req.write("first part;");
    await eventually(
      () => a.received[0]?.body === "first part;",
      () => `the first part of the body at the controller (saw ${JSON.stringify(a.received[0]?.body)})`,
    );
    await eventually(() => events.join("").includes("event: connected"), "the first event before the stream ends");
    controllerResponse!.write('id: 1\ndata: {"type":"PLAYER_CONNECTED"}\n\n');
    await eventually(() => events.join("").includes("PLAYER_CONNECTED"), "the second event while the stream is open");
    assert.equal(ended, false);
    req.end("second part");
    await eventually(() => a.received[0]!.body === "first part;second part", "the whole body at the controller");
    controllerResponse!.end();
    await eventually(() => ended, "the end of the stream");
    await eventually(() => relay.activeRequests === 0, "the exchange to be finished");
  });

  it("relays a body larger than the replay bound unchanged", async () => {
    const a = await controller();
    const relay = await relayWith({ replayBodyBytesMax: 1024 });
    relay.sessionOpened(a.url);
    const big = "x".repeat(256 * 1024);
    assert.equal((await call(relay.url!, "/api/plugin/metrics", { body: big })).status, 200);
    assert.equal(a.received[0]!.body, big);
  });

  it("answers 404 in the error envelope for anything but /api/plugin/* and the event stream, and forwards none of it", async () => {
    const a = await controller();
    const relay = await relayWith();
    relay.sessionOpened(a.url);
    for (const path of [
      "/api/v1/groups",
      "/api/v1/events/ticket",
      "/api/v1/events/streamx",
      "/api/plugin",
      "/api/pluginx/ready",
      "/api/plugin/../v1/users",
      "/api/plugin/%2e%2e/v1/users",
      "/",
      "/metrics",
    ]) {
      const answer = await call(relay.url!, path, { method: "GET" });
      assert.equal(answer.status, 404, path);
      assert.equal(envelopeOf(answer).code, "NOT_FOUND", path);
    }
    assert.equal(a.received.length, 0);
    assert.equal(pluginPathOf("http://elsewhere/api/plugin/ready"), null, "only origin-form targets");
    assert.equal(pluginPathOf("/api/plugin/x/../ready?a=b"), "/api/plugin/ready?a=b");
    assert.equal(pluginPathOf("/api/v1/events/stream?ticket=t&lastSequence=4"), "/api/v1/events/stream?ticket=t&lastSequence=4", "the plugin's event stream");
  });

  it("follows the session: after the first controller refuses, a waiting request goes to the next session's controller", async () => {
    const a = await controller();
    const b = await controller();
    const relay = await relayWith();
    relay.sessionOpened(a.url);
    assert.equal((await call(relay.url!, "/api/plugin/ready", { body: "{}" })).status, 200);
    assert.equal(a.received.length, 1);

    await a.close();
    const pending = call(relay.url!, "/api/plugin/player-leave", {
      headers: { "X-Cloud-Sequence": "7", "content-type": "application/json" },
      body: '{"uuid":"u-1"}',
    });
    await eventually(() => relay.waitingRequests === 1, "the request to wait after the refused connection");
    assert.equal(relay.currentController, null, "a refusing controller is not used until the next session");
    assert.equal(b.received.length, 0);

    relay.sessionOpened(b.url);
    const answer = await pending;
    assert.equal(answer.status, 200);
    assert.equal(b.received.length, 1);
    assert.equal(b.received[0]!.url, "/api/plugin/player-leave");
    assert.equal(b.received[0]!.body, '{"uuid":"u-1"}');
    assert.equal(b.received[0]!.headers["x-cloud-sequence"], "7");
    assert.equal(relay.waitingRequests, 0);
  });

  it("holds requests while no session is open and sends them when one opens", async () => {
    const b = await controller();
    const relay = await relayWith();
    relay.sessionOpened("http://127.0.0.1:9");
    relay.sessionClosed();
    const pending = [call(relay.url!, "/api/plugin/ready", { body: "{}" }), call(relay.url!, "/api/plugin/groups", { method: "GET" })];
    await eventually(() => relay.waitingRequests === 2, "both requests to wait");
    relay.sessionOpened(null);
    assert.equal(relay.waitingRequests, 2, "a controller without an HTTP port is no target");
    relay.sessionOpened(b.url);
    assert.deepEqual(
      (await Promise.all(pending)).map((answer) => answer.status),
      [200, 200],
    );
    assert.deepEqual(b.received.map((r) => r.url).sort(), ["/api/plugin/groups", "/api/plugin/ready"]);
  });

  it("answers 503 CONTROLLER_UNAVAILABLE when no controller is known within waitMs, and never sends the request later", async () => {
    const clock = new FakeClock(1_000);
    const b = await controller();
    const relay = await relayWith({ clock, waitMs: 10_000 });
    const pending = call(relay.url!, "/api/plugin/ready", { body: "{}" });
    await eventually(() => relay.waitingRequests === 1, "the request to wait");
    clock.advance(9_999);
    assert.equal(relay.waitingRequests, 1);
    clock.advance(1);
    const answer = await pending;
    assert.equal(answer.status, 503);
    assert.equal(envelopeOf(answer).code, "CONTROLLER_UNAVAILABLE");
    assert.equal(relay.waitingRequests, 0);
    relay.sessionOpened(b.url);
    assert.equal((await call(relay.url!, "/api/plugin/groups", { method: "GET" })).status, 200);
    assert.deepEqual(
      b.received.map((r) => r.url),
      ["/api/plugin/groups"],
    );
  });

  it("forgets a waiting request whose client went away, and does not send it later", async () => {
    const b = await controller();
    const relay = await relayWith();
    const req = httpRequest(`${relay.url}/api/plugin/player-join`, { method: "POST", agent: false, headers: { "content-length": "100" } });
    req.on("error", () => undefined);
    req.write('{"uuid":');
    await eventually(() => relay.waitingRequests === 1, "the request to wait");
    req.destroy();
    await eventually(() => relay.waitingRequests === 0 && relay.activeRequests === 0, "the abandoned request to be forgotten");
    relay.sessionOpened(b.url);
    assert.equal((await call(relay.url!, "/api/plugin/groups", { method: "GET" })).status, 200);
    assert.deepEqual(
      b.received.map((r) => r.url),
      ["/api/plugin/groups"],
    );
  });

  it("answers 503 at once beyond waitingRequestsMax; those within the bound go through", async () => {
    const b = await controller();
    const relay = await relayWith({ waitingRequestsMax: 2 });
    const waiting = [call(relay.url!, "/api/plugin/ready", { body: "{}" }), call(relay.url!, "/api/plugin/ready", { body: "{}" })];
    await eventually(() => relay.waitingRequests === 2, "two requests to wait");
    const refused = await call(relay.url!, "/api/plugin/ready", { body: "{}" });
    assert.equal(refused.status, 503);
    assert.equal(envelopeOf(refused).code, "CONTROLLER_UNAVAILABLE");
    assert.match(envelopeOf(refused).message, /2 requests already wait/);
    relay.sessionOpened(b.url);
    assert.deepEqual(
      (await Promise.all(waiting)).map((answer) => answer.status),
      [200, 200],
    );
    assert.equal(b.received.length, 2);
  });

  it("answers 502 CONTROLLER_CONNECTION_LOST when the connection breaks after the request was sent, and does not send it again", async () => {
    const a = await controller();
    const b = await controller();
    a.handler = (req, _res, body) => void body.then(() => req.socket.destroy());
    const relay = await relayWith();
    relay.sessionOpened(a.url);
    const answer = await call(relay.url!, "/api/plugin/player-join", { body: '{"uuid":"u","name":"n"}' });
    assert.equal(answer.status, 502);
    assert.equal(envelopeOf(answer).code, "CONTROLLER_CONNECTION_LOST");
    assert.equal(a.received.length, 1);
    assert.equal(a.received[0]!.body, '{"uuid":"u","name":"n"}');
    assert.equal(relay.currentController, a.url, "a broken exchange is no refusal: the controller stays the target");
    relay.sessionOpened(b.url);
    assert.equal(relay.waitingRequests, 0);
    assert.equal(relay.activeRequests, 0);
    assert.equal(b.received.length, 0);
  });

  it("does not replay a body larger than replayBodyBytesMax after a refused connection: 503", async () => {
    const a = await controller();
    await a.close();
    const relay = await relayWith({ replayBodyBytesMax: 1024 });
    relay.sessionOpened(a.url);
    const answer = await call(relay.url!, "/api/plugin/metrics", { body: "y".repeat(200 * 1024) });
    assert.equal(answer.status, 503);
    assert.match(envelopeOf(answer).message, /too large to send again/);
  });

  it("shutdown answers waiting requests 503, cuts streams under way, closes every socket and stops listening", async () => {
    const a = await controller();
    let upstreamClosed = false;
    a.handler = (req, res) => {
      res.on("close", () => (upstreamClosed = true));
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write("event: connected\ndata: {}\n\n");
      req.resume();
    };
    const relay = await relayWith();
    relay.sessionOpened(a.url);
    let streamError: string | null = null;
    let streamOpen = false;
    const stream = httpRequest(`${relay.url}/api/plugin/events/stream`, { method: "GET", agent: false }, (res) => {
      streamOpen = true;
      res.on("error", (e) => (streamError = e.message));
      res.on("aborted", () => (streamError ??= "aborted"));
      res.resume();
    });
    stream.on("error", (e) => (streamError ??= e.message));
    stream.end();
    await eventually(() => streamOpen, "the stream to open");

    relay.sessionClosed();
    const waiting = call(relay.url!, "/api/plugin/ready", { body: "{}" });
    await eventually(() => relay.waitingRequests === 1, "a request to wait");
    const url = relay.url!;
    await relay.close();

    const answer = await waiting;
    assert.equal(answer.status, 503);
    assert.equal(envelopeOf(answer).code, "CONTROLLER_UNAVAILABLE");
    await eventually(() => streamError !== null && upstreamClosed, "the stream cut on both sides");
    assert.equal(relay.activeRequests, 0);
    await assert.rejects(call(url, "/api/plugin/ready", { body: "{}" }), /ECONNREFUSED/);
    await relay.close();
  });

  it("daemon.yml: pluginRelay defaults and bounds", () => {
    assert.deepEqual(parseDaemonConfig({ controllers: ["a:1"] }, "/x").pluginRelay, {
      port: 0,
      waitMs: 10_000,
      waitingRequestsMax: 1_000,
      replayBodyBytesMax: 1_048_576,
      connectionsMax: 2_048,
      bufferedBytesMax: 64 * 1024 * 1024,
      callerCheck: "auto",
    });
    assert.throws(() => parseDaemonConfig({ controllers: ["a:1"], pluginRelay: { callerCheck: "trust-everyone" } }, "/x"), /pluginRelay\.callerCheck/);
    assert.equal(parseDaemonConfig({ controllers: ["a:1"], pluginRelay: { port: 25_600 } }, "/x").pluginRelay.port, 25_600);
    assert.throws(() => parseDaemonConfig({ controllers: ["a:1"], pluginRelay: { port: 70_000 } }, "/x"), /pluginRelay\.port/);
    assert.throws(() => parseDaemonConfig({ controllers: ["a:1"], pluginRelay: { wait: 1 } }, "/x"), /pluginRelay/);
  });
});

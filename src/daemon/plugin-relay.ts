/**
 * The plugin relay: a loopback HTTP server (127.0.0.1) that every instance on the node calls the
 * plugin API through (`CLOUD_CONTROLLER_URL`). It forwards `/api/plugin/*` to the controller of
 * the daemon's current session and so follows the daemon's own failover; game servers never learn
 * a controller's address. Bodies stream both ways (event streams included); a request that could
 * not reach any controller waits, bounded, for the next session and is sent there. What is
 * replayed and what is not: docs/decisions/plugin-relay.md.
 */
import { Agent, createServer, request as httpRequest, type ClientRequest, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { pipeline } from "node:stream";
import { systemClock, type Clock, type Timer } from "../shared/clock.js";
import type { ClientLogger } from "./gateway-client.js";

/** The only paths relayed; anything else is answered 404. */
export const PLUGIN_PATH_PREFIX = "/api/plugin/";
/** The event stream a plugin opens with the ticket of POST /api/plugin/events/ticket (spec document 3). */
export const EVENT_STREAM_PATH = "/api/v1/events/stream";
/** A controller that has not accepted the connection by then counts as unreachable. */
export const controllerConnectTimeoutMs = 3_000;
/** Connections the relay accepts at once (instances on one node, each with a few sockets). */
export const relayConnectionsMax = 4_096;
/** How long a shutdown lets the last answers be written before it cuts every connection. */
export const relayCloseGraceMs = 1_000;
/** Address the relay listens on: instances run on this machine, nothing else may use it. */
export const RELAY_HOST = "127.0.0.1";

/** Error codes of the relay's own answers (spec error envelope). */
export const RELAY_ERROR_CODES = {
  notFound: "NOT_FOUND",
  unavailable: "CONTROLLER_UNAVAILABLE",
  connectionLost: "CONTROLLER_CONNECTION_LOST",
} as const;

export interface PluginRelayOptions {
  /** Port on 127.0.0.1; 0 picks a free one. */
  port: number;
  /** How long a request may wait for a reachable controller, from its first wait. */
  waitMs: number;
  /** Requests waiting at once; one more is answered 503 at once. */
  waitingRequestsMax: number;
  /** Bodies up to this many bytes are kept for a replay on the next controller. */
  replayBodyBytesMax: number;
  clock?: Clock;
  logger?: Pick<ClientLogger, "info" | "warn">;
}

/** Headers that describe one connection, not the request (RFC 9110 §7.6.1), and those the relay sets itself. */
const CONNECTION_HEADERS = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);
const REQUEST_HEADERS_SET_HERE = new Set(["host", "expect", "x-forwarded-for"]);

/**
 * `rawHeaders` without the connection-specific ones (and those named in `Connection`) and without
 * `alsoDrop`, as a flat [name, value, …] list: names, order and repeats stay as they came.
 */
function endToEndHeaders(rawHeaders: readonly string[], alsoDrop: ReadonlySet<string>): string[] {
  const named = new Set<string>();
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    if (rawHeaders[i]!.toLowerCase() !== "connection") continue;
    for (const token of rawHeaders[i + 1]!.split(",")) named.add(token.trim().toLowerCase());
  }
  const kept: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!.toLowerCase();
    if (CONNECTION_HEADERS.has(name) || alsoDrop.has(name) || named.has(name)) continue;
    kept.push(rawHeaders[i]!, rawHeaders[i + 1]!);
  }
  return kept;
}

/**
 * Answers with the spec's error envelope (closing the connection afterwards when `closeConnection`),
 * or cuts the connection when the answer had begun.
 */
function answerError(res: ServerResponse, status: number, code: string, message: string, closeConnection = false): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify({ error: { code, message, status } });
  const headers: Record<string, string | number> = { "content-type": "application/json; charset=UTF-8", "content-length": Buffer.byteLength(body) };
  if (closeConnection) headers.connection = "close";
  res.writeHead(status, headers).end(body);
}

/** `req.url` as the path to forward, or null when it is not a plugin route. */
export function pluginPathOf(requestUrl: string | undefined): string | null {
  if (!requestUrl?.startsWith("/")) return null;
  let url: URL;
  try {
    url = new URL(requestUrl, "http://relay.invalid");
  } catch {
    // An unparsable target is not a plugin route.
    return null;
  }
  // The normalized path ("/api/plugin/../v1/x" is "/api/v1/x") is what is checked and what is sent.
  const relayed = url.pathname.startsWith(PLUGIN_PATH_PREFIX) || url.pathname === EVENT_STREAM_PATH;
  return relayed ? url.pathname + url.search : null;
}

/** The relay's side of one exchange: what a {@link RelayedRequest} asks of it. */
interface RelayCore {
  readonly options: Required<Pick<PluginRelayOptions, "waitMs" | "replayBodyBytesMax">>;
  readonly clock: Clock;
  readonly agent: Agent;
  target(): string | null;
  enqueue(exchange: RelayedRequest): void;
  dequeue(exchange: RelayedRequest): void;
  refusedBy(baseUrl: string, why: string): void;
  finished(exchange: RelayedRequest): void;
}

/**
 * One plugin request on its way: its body is copied while it is small enough to be sent again;
 * it is sent to the current controller, or waits for one. It is sent again only when the last
 * attempt never got a connection (so no controller can have seen it) and the whole body is held.
 */
class RelayedRequest {
  private held: Buffer[] = [];
  private heldBytes = 0;
  /** Nothing is held any more (the body outgrew `replayBodyBytesMax`, or an answer came): it cannot be sent again. */
  private bodyReleased = false;
  private bodyEnded = false;
  private upstream: ClientRequest | null = null;
  private deadlineMs: number | null = null;
  private waitTimer: Timer | null = null;
  private answered = false;
  private done = false;

  constructor(
    private readonly relay: RelayCore,
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
    private readonly path: string,
  ) {}

  begin(): void {
    this.req.on("data", (chunk: Buffer) => this.bodyChunk(chunk));
    this.req.on("end", () => {
      this.bodyEnded = true;
      this.upstream?.end();
    });
    // A client that went away mid-body: the response's close event ends the exchange.
    this.req.on("error", () => undefined);
    this.res.on("close", () => {
      if (!this.res.writableFinished) this.abandon();
      this.finish();
    });
    this.dispatch();
  }

  /** Sends to the current controller, or waits for one. */
  dispatch(): void {
    if (this.done) return;
    if (this.deadlineMs !== null && this.relay.clock.nowMs() >= this.deadlineMs) {
      this.fail(503, RELAY_ERROR_CODES.unavailable, `No controller could be reached within ${this.relay.options.waitMs} ms`);
      return;
    }
    const target = this.relay.target();
    if (target === null) this.relay.enqueue(this);
    else this.attempt(target);
  }

  /** Starts (or continues) the bounded wait for a controller; the deadline counts from the first wait. */
  startWaiting(): void {
    const now = this.relay.clock.nowMs();
    this.deadlineMs ??= now + this.relay.options.waitMs;
    this.waitTimer?.cancel();
    this.waitTimer = this.relay.clock.setTimeout(() => {
      this.waitTimer = null;
      this.relay.dequeue(this);
      this.fail(503, RELAY_ERROR_CODES.unavailable, `No controller could be reached within ${this.relay.options.waitMs} ms`);
    }, this.deadlineMs - now);
  }

  /** The wait is over (a controller is known again): try it. */
  wake(): void {
    this.waitTimer?.cancel();
    this.waitTimer = null;
    this.dispatch();
  }

  fail(status: number, code: string, message: string, closeConnection = false): void {
    if (this.done) return;
    this.done = true;
    this.waitTimer?.cancel();
    this.relay.dequeue(this);
    this.upstream?.destroy();
    this.upstream = null;
    if (!this.answered) answerError(this.res, status, code, message, closeConnection);
    else this.res.destroy();
  }

  private bodyChunk(chunk: Buffer): void {
    if (!this.bodyReleased) {
      this.held.push(chunk);
      this.heldBytes += chunk.byteLength;
      if (this.heldBytes > this.relay.options.replayBodyBytesMax) {
        if (this.upstream) this.releaseBody();
        // Nowhere to send it yet: stop reading until a controller takes what is held.
        else this.req.pause();
      }
    }
    const upstream = this.upstream;
    if (upstream && !upstream.write(chunk)) {
      this.req.pause();
      upstream.once("drain", () => this.req.resume());
    }
  }

  private releaseBody(): void {
    this.bodyReleased = true;
    this.held = [];
  }

  private attempt(target: string): void {
    const url = new URL(this.path, target);
    const forwardedFor = this.req.headers["x-forwarded-for"];
    const headers = endToEndHeaders(this.req.rawHeaders, REQUEST_HEADERS_SET_HERE);
    const client = this.req.socket.remoteAddress ?? "unknown";
    headers.push("Host", url.host, "X-Forwarded-For", forwardedFor ? `${forwardedFor}, ${client}` : client);
    const upstream = httpRequest(url, { method: this.req.method, headers, agent: this.relay.agent });
    this.upstream = upstream;
    let connected = false;
    let connectTimer: Timer | null = null;
    upstream.on("socket", (socket: Socket) => {
      if (!socket.connecting) {
        connected = true;
        return;
      }
      connectTimer = this.relay.clock.setTimeout(
        () => upstream.destroy(Object.assign(new Error(`no connection within ${controllerConnectTimeoutMs} ms`), { code: "ETIMEDOUT" })),
        controllerConnectTimeoutMs,
      );
      socket.once("connect", () => {
        connected = true;
        connectTimer?.cancel();
      });
    });
    upstream.on("response", (response) => this.respond(response));
    upstream.on("error", (error: NodeJS.ErrnoException) => {
      connectTimer?.cancel();
      if (this.upstream === upstream) this.upstreamFailed(target, error, connected);
    });
    upstream.on("close", () => connectTimer?.cancel());
    for (const chunk of this.held) upstream.write(chunk);
    if (this.heldBytes > this.relay.options.replayBodyBytesMax) this.releaseBody();
    // Reading stopped while nobody took the body (or for an earlier attempt's back-pressure).
    this.req.resume();
    if (this.bodyEnded) upstream.end();
  }

  private upstreamFailed(target: string, error: NodeJS.ErrnoException, connected: boolean): void {
    this.upstream = null;
    if (this.done) return;
    const why = error.code ?? error.message;
    if (this.answered) {
      this.res.destroy();
      return;
    }
    if (connected) {
      this.fail(
        502,
        RELAY_ERROR_CODES.connectionLost,
        `The connection to the controller broke before it answered (${why}); the request may have reached it and is not sent again`,
      );
      return;
    }
    this.relay.refusedBy(target, why);
    if (this.bodyReleased) {
      this.fail(
        503,
        RELAY_ERROR_CODES.unavailable,
        `The controller could not be reached (${why}) and the request body is larger than ${this.relay.options.replayBodyBytesMax} bytes, too large to send again`,
      );
      return;
    }
    this.dispatch();
  }

  private respond(response: IncomingMessage): void {
    if (this.done) {
      response.destroy();
      return;
    }
    this.answered = true;
    this.releaseBody();
    this.res.writeHead(response.statusCode ?? 502, response.statusMessage || undefined, endToEndHeaders(response.rawHeaders, new Set()));
    // Headers go out now: an event stream may send its first event much later.
    this.res.flushHeaders();
    pipeline(response, this.res, () => undefined);
  }

  /** The instance went away: nothing is sent on its behalf any more. */
  private abandon(): void {
    this.done = true;
    this.waitTimer?.cancel();
    this.relay.dequeue(this);
    this.upstream?.destroy();
    this.upstream = null;
  }

  private finish(): void {
    this.done = true;
    this.relay.finished(this);
  }
}

/**
 * The relay server. {@link PluginRelay.sessionOpened} and {@link PluginRelay.sessionClosed} follow
 * the daemon's stream; a controller that refuses a connection is not used again until the next
 * session opens (or `waitMs` has passed, for an HTTP side that comes back under the same session).
 */
export class PluginRelay {
  private server: Server | null = null;
  private portValue: number | null = null;
  private controller: string | null = null;
  private refused: string | null = null;
  private refusedTimer: Timer | null = null;
  private closed = false;
  private closing: Promise<void> | null = null;
  private readonly waiting = new Set<RelayedRequest>();
  private readonly active = new Set<RelayedRequest>();
  private readonly clock: Clock;
  /** No kept-alive sockets: a new connection per request tells "refused" from "may have been received". */
  private readonly agent = new Agent({ keepAlive: false });
  private readonly core: RelayCore;

  constructor(private readonly options: PluginRelayOptions) {
    this.clock = options.clock ?? systemClock;
    this.core = {
      options,
      clock: this.clock,
      agent: this.agent,
      target: () => this.currentController,
      enqueue: (exchange) => this.enqueue(exchange),
      dequeue: (exchange) => {
        this.waiting.delete(exchange);
      },
      refusedBy: (baseUrl, why) => this.refusedBy(baseUrl, why),
      finished: (exchange) => {
        this.active.delete(exchange);
        this.waiting.delete(exchange);
      },
    };
  }

  /** `http://127.0.0.1:<port>` once started, else null. */
  get url(): string | null {
    return this.portValue === null ? null : `http://${RELAY_HOST}:${this.portValue}`;
  }

  /** Requests waiting for a controller now. */
  get waitingRequests(): number {
    return this.waiting.size;
  }

  /** Requests being relayed or waiting now. */
  get activeRequests(): number {
    return this.active.size;
  }

  /** The controller requests go to now: the session's, unless it refused a connection. */
  get currentController(): string | null {
    return this.controller !== null && this.controller !== this.refused ? this.controller : null;
  }

  /** Listens on 127.0.0.1:`port`; rejects when the port is taken. */
  async start(): Promise<void> {
    if (this.server || this.closed) return;
    const server = createServer((req, res) => this.handle(req, res));
    server.maxConnections = relayConnectionsMax;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.options.port, RELAY_HOST, () => {
        server.off("error", reject);
        resolve();
      });
    });
    this.server = server;
    this.portValue = (server.address() as { port: number }).port;
    if (this.closed) await this.closeNow();
  }

  /** A session opened; `baseUrl` is its controller's HTTP side (null: it announced none). */
  sessionOpened(baseUrl: string | null): void {
    this.controller = baseUrl;
    this.clearRefused();
    this.wakeWaiting();
  }

  /** The session ended: requests wait for the next one. */
  sessionClosed(): void {
    this.controller = null;
    this.clearRefused();
  }

  /**
   * Stops listening, answers what waits 503 and cuts what is under way (an answer already begun is
   * cut short), then closes every socket: idle ones at once, the rest once their 503 is written or
   * after {@link relayCloseGraceMs}.
   */
  close(): Promise<void> {
    this.closing ??= this.closeNow();
    return this.closing;
  }

  private async closeNow(): Promise<void> {
    this.closed = true;
    this.clearRefused();
    for (const exchange of [...this.active]) exchange.fail(503, RELAY_ERROR_CODES.unavailable, "The daemon is shutting down", true);
    const server = this.server;
    if (server) {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      const cut = this.clock.setTimeout(() => server.closeAllConnections(), relayCloseGraceMs, { unref: true });
      await closed;
      cut.cancel();
    }
    this.agent.destroy();
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const path = pluginPathOf(req.url);
    if (path === null) {
      answerError(res, 404, RELAY_ERROR_CODES.notFound, `Only /api/plugin/* and ${EVENT_STREAM_PATH} are relayed to the controller`);
      return;
    }
    if (this.closed) {
      answerError(res, 503, RELAY_ERROR_CODES.unavailable, "The daemon is shutting down", true);
      return;
    }
    const exchange = new RelayedRequest(this.core, req, res, path);
    this.active.add(exchange);
    exchange.begin();
  }

  private enqueue(exchange: RelayedRequest): void {
    if (this.waiting.has(exchange)) return;
    if (this.waiting.size >= this.options.waitingRequestsMax) {
      exchange.fail(503, RELAY_ERROR_CODES.unavailable, `No controller is reachable and ${this.options.waitingRequestsMax} requests already wait for one`);
      return;
    }
    this.waiting.add(exchange);
    exchange.startWaiting();
  }

  /** `baseUrl` refused a connection: unused until the next session, or for `waitMs`. */
  private refusedBy(baseUrl: string, why: string): void {
    if (baseUrl !== this.controller || this.refused === baseUrl) return;
    this.options.logger?.warn(
      `Controller ${baseUrl} refused a plugin request (${why}); plugin requests wait for the next session (at most ${this.options.waitMs} ms)`,
    );
    this.refused = baseUrl;
    this.refusedTimer = this.clock.setTimeout(
      () => {
        this.refusedTimer = null;
        this.refused = null;
        this.wakeWaiting();
      },
      this.options.waitMs,
      { unref: true },
    );
  }

  private clearRefused(): void {
    this.refusedTimer?.cancel();
    this.refusedTimer = null;
    this.refused = null;
  }

  private wakeWaiting(): void {
    if (this.currentController === null) return;
    const woken = [...this.waiting];
    this.waiting.clear();
    for (const exchange of woken) exchange.wake();
  }
}

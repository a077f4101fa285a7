/**
 * One plugin request on its way through the relay (`plugin-relay.ts`), and the HTTP details it
 * shares with the relay: which headers are end-to-end, the relay's own error answers. Its body is
 * copied while it is small enough to be sent again, within the relay's budget for all requests;
 * what is replayed and what is not: docs/decisions/plugin-relay.md.
 */
import { request as httpRequest, type Agent, type ClientRequest, type IncomingMessage, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { pipeline } from "node:stream";
import type { Clock, Timer } from "../shared/clock.js";

/** A controller that has not accepted the connection by then counts as unreachable. */
export const controllerConnectTimeoutMs = 3_000;

/** Error codes of the relay's own answers (spec error envelope). */
export const RELAY_ERROR_CODES = {
  notFound: "NOT_FOUND",
  unavailable: "CONTROLLER_UNAVAILABLE",
  connectionLost: "CONTROLLER_CONNECTION_LOST",
  /** The relay's connection cap or body budget is reached. */
  busy: "RELAY_BUSY",
  /** The connection does not come from the processes of the instance the call names. */
  forbidden: "FORBIDDEN",
} as const;

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
export const REQUEST_HEADERS_SET_HERE = new Set(["host", "expect", "x-forwarded-for"]);

/**
 * `rawHeaders` without the connection-specific ones (and those named in `Connection`) and without
 * `alsoDrop`, as a flat [name, value, …] list: names, order and repeats stay as they came.
 */
export function endToEndHeaders(rawHeaders: readonly string[], alsoDrop: ReadonlySet<string>): string[] {
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
export function answerError(res: ServerResponse, status: number, code: string, message: string, closeConnection = false): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify({ error: { code, message, status } });
  const headers: Record<string, string | number> = { "content-type": "application/json; charset=UTF-8", "content-length": Buffer.byteLength(body) };
  if (closeConnection) headers.connection = "close";
  res.writeHead(status, headers).end(body);
}

/** The relay's side of one exchange: what a {@link RelayedRequest} asks of it. */
export interface RelayCore {
  readonly options: { readonly waitMs: number; readonly replayBodyBytesMax: number };
  readonly clock: Clock;
  readonly agent: Agent;
  target(): string | null;
  enqueue(exchange: RelayedRequest): void;
  dequeue(exchange: RelayedRequest): void;
  refusedBy(baseUrl: string, why: string): void;
  finished(exchange: RelayedRequest): void;
  /** Takes `bytes` of the budget all requests hold their bodies in; false when they do not fit. */
  hold(bytes: number): boolean;
  /** Gives `bytes` back to the budget. */
  release(bytes: number): void;
  /** The budget, for the refusal's message. */
  readonly bufferedBytesMax: number;
}

/**
 * One plugin request on its way: its body is copied while it is small enough to be sent again
 * and fits the relay's budget; it is sent to the current controller, or waits for one. It is sent
 * again only when the last attempt never got a connection (so no controller can have seen it) and
 * the whole body is held. A waiting request whose body does not fit the budget is refused with 503
 * RELAY_BUSY; one under way streams on without a copy (it can no longer be sent again).
 */
export class RelayedRequest {
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
    this.releaseBody();
    if (this.answered) {
      this.res.destroy();
      return;
    }
    answerError(this.res, status, code, message, closeConnection);
    // The rest of a body still coming in is not read: the connection ends once the answer is out.
    if (closeConnection && !this.bodyEnded) this.res.once("finish", () => this.req.socket.destroy());
  }

  private bodyChunk(chunk: Buffer): void {
    if (this.done) return;
    if (!this.bodyReleased) {
      if (!this.relay.hold(chunk.byteLength)) {
        if (!this.upstream) {
          this.fail(
            503,
            RELAY_ERROR_CODES.busy,
            `The relay already holds its bound of ${this.relay.bufferedBytesMax} bytes of request bodies waiting for a controller; try again`,
            true,
          );
          return;
        }
        // Under way: the body streams on without a copy, and cannot be sent again.
        this.releaseBody();
      } else {
        this.held.push(chunk);
        this.heldBytes += chunk.byteLength;
        if (this.heldBytes > this.relay.options.replayBodyBytesMax) {
          if (this.upstream) this.releaseBody();
          // Nowhere to send it yet: stop reading until a controller takes what is held.
          else this.req.pause();
        }
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
    this.relay.release(this.heldBytes);
    this.heldBytes = 0;
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
    this.releaseBody();
    this.relay.finished(this);
  }
}

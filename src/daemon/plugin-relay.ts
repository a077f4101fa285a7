/**
 * The plugin relay: a loopback HTTP server (127.0.0.1) that every instance on the node calls the
 * plugin API through (`CLOUD_CONTROLLER_URL`). It forwards `/api/plugin/*` to the controller of
 * the daemon's current session and so follows the daemon's own failover; game servers never learn
 * a controller's address. Bodies stream both ways (event streams included); a request that could
 * not reach any controller waits, bounded, for the next session and is sent there. Each call is
 * tied to the instance whose processes made it (`relay-callers.ts`), and the relay's memory is
 * bounded in total: a connection cap and a budget for the bodies all requests hold. What is
 * replayed and what is not, and the trust model: docs/decisions/plugin-relay.md.
 */
import { Agent, createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { systemClock, type Clock, type Timer } from "../shared/clock.js";
import type { ClientLogger } from "./gateway-client.js";
import { claimOf, type RelayCallerCheck } from "./relay-callers.js";
import { answerError, RELAY_ERROR_CODES, RelayedRequest, type RelayCore } from "./relayed-request.js";

export { controllerConnectTimeoutMs, RELAY_ERROR_CODES } from "./relayed-request.js";

/** The only paths relayed; anything else is answered 404. */
export const PLUGIN_PATH_PREFIX = "/api/plugin/";
/** The event stream a plugin opens with the ticket of POST /api/plugin/events/ticket (spec document 3). */
export const EVENT_STREAM_PATH = "/api/v1/events/stream";
/** Connections the relay accepts at once unless configured (instances on one node, each with a few sockets). */
export const relayConnectionsMaxDefault = 2_048;
/** Bytes of request bodies the relay holds for all requests together unless configured. */
export const relayBufferedBytesMaxDefault = 64 * 1024 * 1024;
/** How long a shutdown lets the last answers be written before it cuts every connection. */
export const relayCloseGraceMs = 1_000;
/** Address the relay listens on: instances run on this machine, nothing else may use it. */
export const RELAY_HOST = "127.0.0.1";

export interface PluginRelayOptions {
  /** Port on 127.0.0.1; 0 picks a free one. */
  port: number;
  /** How long a request may wait for a reachable controller, from its first wait. */
  waitMs: number;
  /** Requests waiting at once; one more is answered 503 at once. */
  waitingRequestsMax: number;
  /** Bodies up to this many bytes are kept for a replay on the next controller. */
  replayBodyBytesMax: number;
  /** Connections open at once; one more is answered 503 RELAY_BUSY and closed. Default {@link relayConnectionsMaxDefault}. */
  connectionsMax?: number;
  /** Bytes of request bodies held for all requests together; a waiting request beyond it is answered 503 RELAY_BUSY. Default {@link relayBufferedBytesMaxDefault}. */
  bufferedBytesMax?: number;
  /** Which instance's processes a connection comes from; without it every local caller is relayed. */
  callers?: RelayCallerCheck | null;
  clock?: Clock;
  logger?: Pick<ClientLogger, "info" | "warn">;
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
  private readonly connectionsMax: number;
  private readonly bufferedBytesMaxValue: number;
  private openConnections = 0;
  private heldBytes = 0;
  private heldBytesPeak = 0;
  private refusedCallers = 0;
  /** Connections refused by the cap: whatever they send is not read. */
  private readonly overCap = new WeakSet<Socket>();

  constructor(private readonly options: PluginRelayOptions) {
    this.clock = options.clock ?? systemClock;
    this.connectionsMax = options.connectionsMax ?? relayConnectionsMaxDefault;
    this.bufferedBytesMaxValue = options.bufferedBytesMax ?? relayBufferedBytesMaxDefault;
    this.core = {
      options,
      bufferedBytesMax: this.bufferedBytesMaxValue,
      hold: (bytes) => {
        if (this.heldBytes + bytes > this.bufferedBytesMaxValue) return false;
        this.heldBytes += bytes;
        this.heldBytesPeak = Math.max(this.heldBytesPeak, this.heldBytes);
        return true;
      },
      release: (bytes) => {
        this.heldBytes -= bytes;
      },
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

  /** Connections open now. */
  get connections(): number {
    return this.openConnections;
  }

  /** Bytes of request bodies held now, for all requests together (at most `bufferedBytesMax`). */
  get bufferedBytes(): number {
    return this.heldBytes;
  }

  /** The most bytes of request bodies held at once since the start. */
  get bufferedBytesPeak(): number {
    return this.heldBytesPeak;
  }

  /** The controller requests go to now: the session's, unless it refused a connection. */
  get currentController(): string | null {
    return this.controller !== null && this.controller !== this.refused ? this.controller : null;
  }

  /** Listens on 127.0.0.1:`port`; rejects when the port is taken. */
  async start(): Promise<void> {
    if (this.server || this.closed) return;
    const server = createServer((req, res) => this.handle(req, res));
    server.on("connection", (socket: Socket) => this.admitConnection(socket));
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

  /** Counts a new connection; one beyond the cap is answered 503 RELAY_BUSY at once and closed. */
  private admitConnection(socket: Socket): void {
    if (this.openConnections >= this.connectionsMax) {
      const body = JSON.stringify({
        error: { code: RELAY_ERROR_CODES.busy, message: `The plugin relay already has ${this.connectionsMax} connections open; try again`, status: 503 },
      });
      this.overCap.add(socket);
      socket.on("error", () => undefined);
      socket.end(
        `HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json; charset=UTF-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      );
      socket.destroySoon();
      return;
    }
    this.openConnections++;
    socket.once("close", () => this.openConnections--);
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    if (this.overCap.has(req.socket)) {
      req.socket.destroy();
      return;
    }
    const path = pluginPathOf(req.url);
    if (path === null) {
      answerError(res, 404, RELAY_ERROR_CODES.notFound, `Only /api/plugin/* and ${EVENT_STREAM_PATH} are relayed to the controller`);
      return;
    }
    if (this.closed) {
      answerError(res, 503, RELAY_ERROR_CODES.unavailable, "The daemon is shutting down", true);
      return;
    }
    const callers = this.options.callers;
    if (!callers) {
      this.relay(req, res, path);
      return;
    }
    // The body waits unread (no listener yet) while the caller is looked up.
    const claim = claimOf(req.rawHeaders);
    const verdict = claim.ok ? callers.admits(req.socket, claim.instanceId) : Promise.resolve(claim);
    verdict.then(
      (verdict) => {
        if (res.writableEnded || res.destroyed) return;
        if (verdict.ok) {
          if (this.closed) answerError(res, 503, RELAY_ERROR_CODES.unavailable, "The daemon is shutting down", true);
          else this.relay(req, res, path);
          return;
        }
        if (this.refusedCallers++ % 100 === 0) {
          this.options.logger?.warn(
            `Plugin relay refused a call to ${path.split("?")[0]} from 127.0.0.1:${req.socket.remotePort}: ${verdict.reason} (${this.refusedCallers} refused so far)`,
          );
        }
        answerError(res, 403, RELAY_ERROR_CODES.forbidden, `Refused by the plugin relay: ${verdict.reason}`, true);
      },
      (err: unknown) => answerError(res, 503, RELAY_ERROR_CODES.unavailable, `The plugin relay could not check the caller: ${(err as Error).message}`, true),
    );
  }

  private relay(req: IncomingMessage, res: ServerResponse, path: string): void {
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

/**
 * A small real HTTP server (127.0.0.1, ephemeral port) speaking the plugin routes of spec document 3
 * the way the SDK expects them: workload tokens that `auth/refresh` rotates (the old one stops
 * working), one-shot tickets from `events/ticket`, and the SSE stream `GET /api/v1/events/stream`
 * with `connected` and `message` frames. Tests script answers per path and read what was sent.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface RecordedRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: IncomingMessage["headers"];
  body: unknown;
}

/** A scripted answer: status and body, after an optional delay. */
export interface ScriptedAnswer {
  status: number;
  body?: unknown;
  delayMs?: number;
}

export type Handler = (request: RecordedRequest) => ScriptedAnswer | Promise<ScriptedAnswer>;

export interface StreamEvent {
  type: string;
  data: Record<string, unknown>;
  source?: string;
}

export interface SpecServer {
  url: string;
  requests: RecordedRequest[];
  /** Tokens accepted now. */
  validTokens: Set<string>;
  /** Moves a token from the valid ones to the expired ones, which only the refresh route still takes. */
  expire(token: string): void;
  /** Refreshes answered so far. */
  refreshCount(): number;
  /** The default ticket route (issues tickets the stream accepts), for scripts that wrap it. */
  ticketHandler(): Handler;
  /** Overrides the answer for `METHOD /path`. */
  handle(route: string, handler: Handler): void;
  /** Appends an event (sequence = position + 1) and sends it to every open stream. */
  publish(event: StreamEvent): number;
  /** Sends a frame without an id (`transfer`, `transfer-completed`, `transfer-failed`) to every open stream. */
  sendFrame(event: string, data: unknown): void;
  /** Closes every open stream connection (the client must reconnect). */
  dropStreams(): void;
  /** Pretends the buffer lost everything up to `earliest`: a resume from before it gets RESYNC_REQUIRED. */
  forgetBefore(earliest: number): void;
  openStreams(): number;
  /** The player registry's epoch named by the `connected` frame of every stream opened from now on (none when null). */
  setRegistryEpoch(epoch: string | null): void;
  close(): Promise<void>;
}

const ok = (body: unknown = {}): ScriptedAnswer => ({ status: 200, body });
const envelope = (status: number, code: string, message: string): ScriptedAnswer => ({ status, body: { error: { code, message, status } } });

export async function startSpecServer(options: { token?: string; refreshDelayMs?: number } = {}): Promise<SpecServer> {
  const requests: RecordedRequest[] = [];
  const validTokens = new Set([options.token ?? "token-0"]);
  const expiredTokens = new Set<string>();
  const handlers = new Map<string, Handler>();
  const tickets = new Set<string>();
  const events: (StreamEvent & { sequence: number; timestamp: string })[] = [];
  const streams = new Set<ServerResponse>();
  let refreshes = 0;
  let ticketCounter = 0;
  let earliest = 1;
  let registryEpoch: string | null = null;

  const frame = (event: string, data: unknown, id?: number) => `${id === undefined ? "" : `id: ${id}\n`}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
  const eventFrame = (e: (typeof events)[number]) =>
    frame("message", { type: e.type, sequence: e.sequence, source: e.source ?? "controller", timestamp: e.timestamp, data: e.data }, e.sequence);

  const defaults: Record<string, Handler> = {
    "POST /api/plugin/auth/refresh": async (req) => {
      if (options.refreshDelayMs) await new Promise((resolve) => setTimeout(resolve, options.refreshDelayMs));
      const old = String(req.headers.authorization).slice("Bearer ".length);
      refreshes += 1;
      const token = `token-${refreshes}`;
      validTokens.delete(old);
      expiredTokens.delete(old);
      validTokens.add(token);
      return ok({ token, expiresAt: new Date(Date.now() + 3_600_000).toISOString() });
    },
    "POST /api/plugin/events/ticket": () => {
      ticketCounter += 1;
      const ticket = `ticket-${ticketCounter}`;
      tickets.add(ticket);
      return ok({ ticket, expiresAt: new Date(Date.now() + 30_000).toISOString() });
    },
    "GET /api/plugin/instances": () => ok([{ id: "lobby-1", group: "lobby", state: "RUNNING", playerCount: 1 }]),
    "GET /api/plugin/groups": () => ok([{ name: "lobby", runningInstances: 1, totalPlayers: 1 }]),
    "GET /api/plugin/players": () => ok([]),
  };

  async function readBody(req: IncomingMessage): Promise<unknown> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString("utf8");
    if (text === "") return undefined;
    try {
      return JSON.parse(text);
    } catch {
      return text;
    }
  }

  function serveStream(recorded: RecordedRequest, res: ServerResponse): void {
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    const ticket = recorded.query.get("ticket") ?? "";
    if (!tickets.delete(ticket)) {
      res.end(frame("error", { message: "Unauthorized" }));
      return;
    }
    const latest = events.length;
    res.write(frame("connected", { message: "Connected to the event stream", latestSequence: latest, ...(registryEpoch === null ? {} : { registryEpoch }) }));
    const from = recorded.query.get("lastSequence");
    if (from !== null) {
      const position = Number(from);
      if (position + 1 < earliest) {
        res.write(
          frame(
            "message",
            { type: "RESYNC_REQUIRED", lastSequence: position, earliestSequence: earliest, latestSequence: latest, timestamp: new Date().toISOString() },
            latest,
          ),
        );
      } else for (const e of events.slice(position)) res.write(eventFrame(e));
    }
    streams.add(res);
    res.on("close", () => streams.delete(res));
  }

  const server: Server = createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? "/", "http://127.0.0.1");
      const recorded: RecordedRequest = {
        method: req.method ?? "GET",
        path: url.pathname,
        query: url.searchParams,
        headers: req.headers,
        body: await readBody(req),
      };
      requests.push(recorded);
      if (recorded.method === "GET" && recorded.path === "/api/v1/events/stream") return serveStream(recorded, res);
      const token = String(req.headers.authorization ?? "").replace(/^Bearer /, "");
      let answer: ScriptedAnswer;
      const refreshing = recorded.method === "POST" && recorded.path === "/api/plugin/auth/refresh";
      if (!validTokens.has(token) && !(refreshing && expiredTokens.has(token))) answer = envelope(401, "UNAUTHORIZED", "Invalid or expired token");
      else {
        const key = `${recorded.method} ${recorded.path}`;
        const handler = handlers.get(key) ?? defaults[key] ?? (() => ok({}));
        answer = await handler(recorded);
      }
      if (answer.delayMs) await new Promise((resolve) => setTimeout(resolve, answer.delayMs));
      if (res.destroyed) return;
      const text = answer.body === undefined ? "" : JSON.stringify(answer.body);
      res.writeHead(answer.status, text === "" ? {} : { "content-type": "application/json" }).end(text);
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;

  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    validTokens,
    expire: (token) => {
      validTokens.delete(token);
      expiredTokens.add(token);
    },
    refreshCount: () => refreshes,
    ticketHandler: () => defaults["POST /api/plugin/events/ticket"],
    handle: (route, handler) => void handlers.set(route, handler),
    publish: (event) => {
      const stored = { ...event, sequence: events.length + 1, timestamp: new Date().toISOString() };
      events.push(stored);
      for (const res of streams) res.write(eventFrame(stored));
      return stored.sequence;
    },
    sendFrame: (event, data) => {
      for (const res of streams) res.write(frame(event, data));
    },
    dropStreams: () => {
      for (const res of streams) res.destroy();
    },
    forgetBefore: (value) => void (earliest = value),
    openStreams: () => streams.size,
    setRegistryEpoch: (epoch) => void (registryEpoch = epoch),
    close: async () => {
      for (const res of streams) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

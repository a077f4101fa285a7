/**
 * Logs (spec document 2, "Logs"): the controller's ring buffer, the daemon log mirror of one node,
 * their live tails (SSE with a ticket) and the controller log share. Permission system.logs.view;
 * sharing also needs share.invoke.
 *
 * Query names (the spec leaves them open; docs/decisions/logs.md): `level` (minimum level, any
 * case), `logger` (logger name prefix), `limit` (the newest this many matching records, 1 to
 * 2,000), and on the record reads `afterSeq` (records numbered above it). A bad value is answered
 * 422 VALIDATION_ERROR and changes nothing. The stream routes take the same filters plus `ticket`
 * (from `GET /api/v1/system/logs/ticket`, single-use, 30 s); a missing, unknown, expired or used
 * ticket gets one `event: error` with `{"message":"Unauthorized"}` and the stream closes.
 *
 * A node's log is read where its daemon's stream is held: on another controller the holder is asked
 * (`ReadNodeLogs` between members); a holder that cannot be asked is 503 LOG_HOLDER_UNAVAILABLE
 * (502 LOG_HOLDER_ERROR when it refused), checked before a stream's ticket is used.
 */
import type { Hono } from "hono";
import { streamSSE } from "hono/streaming";
import { Type } from "@sinclair/typebox";
import type { Tickets } from "../../coordination/tickets.js";
import type { DiagnosticsService } from "../../diagnostics/diagnostics-service.js";
import { LOG_LEVELS, selectRecords, type LogQuery } from "../../logs/log-query.js";
import { logFrame, type LogSource, type LogStreamHub, type LogStreamWriter } from "../../logs/log-stream.js";
import type { NodeLogRead } from "../../logs/node-log-buffers.js";
import type { LogLevel, LogRecord } from "../../logs/types.js";
import type { AuditRecorder } from "../../audit/types.js";
import type { ShareService } from "../../share/share-service.js";
import { forbidden, validationError } from "../../shared/errors.js";
import { addRoute, type RouteRegistry } from "../route.js";
import type { AppContext, AppEnv } from "../types.js";
import { ShareOptionsSchema, ShareResultSchema } from "./share-schemas.js";
import { auditShareCreated } from "./shares.js";

const tag = "Logs";
/** Records one read returns at most (the controller buffer's capacity). */
export const LOG_READ_LIMIT_MAX = 2_000;

/** Payload of a log-stream ticket. */
export interface LogStreamTicket {
  readonly kind: "logs";
  readonly username: string;
  readonly [field: string]: unknown;
}

/** The daemon log mirror as the routes read it, whichever controller holds the node's stream (`src/logs/node-log-access.ts`). */
export interface NodeLogAccess {
  /** Rejects with 503 LOG_HOLDER_UNAVAILABLE or 502 LOG_HOLDER_ERROR when the holder cannot be asked. */
  read(nodeId: string, query: LogQuery): Promise<NodeLogRead>;
  /** The node's records for a tail filtered by `query`. */
  source(nodeId: string, query: LogQuery): LogSource;
}

export interface LogRoutesDeps {
  logs: { recent(): LogRecord[]; tail(listener: (record: LogRecord) => void): () => void; readonly capacity: number; readonly level: LogLevel };
  nodeLogs: NodeLogAccess;
  /** Rejects with 404 NOT_FOUND when the node is unknown. */
  requireNode(nodeId: string): Promise<unknown>;
  hub: LogStreamHub;
  tickets: Tickets<LogStreamTicket>;
  share: ShareService;
  diagnostics: DiagnosticsService;
  audit: AuditRecorder;
}

const FilterFields = {
  level: Type.Optional(Type.String({ maxLength: 16, description: "Minimum level: TRACE, DEBUG, INFO, WARN or ERROR (any case)" })),
  logger: Type.Optional(Type.String({ maxLength: 256, description: "Logger name prefix" })),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: LOG_READ_LIMIT_MAX, description: "The newest this many matching records" })),
};
const ReadQuery = Type.Object({
  ...FilterFields,
  afterSeq: Type.Optional(Type.Integer({ minimum: 0, description: "Only records numbered above this" })),
});
const StreamQuery = Type.Object({ ...FilterFields, ticket: Type.Optional(Type.String({ maxLength: 256 })) });
const NodeParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 256 }) });

const LogRecordSchema = Type.Object({
  seq: Type.Integer(),
  ts: Type.Integer({ description: "Epoch milliseconds" }),
  level: Type.String(),
  logger: Type.String(),
  thread: Type.String(),
  message: Type.String(),
  throwable: Type.Optional(Type.String()),
  mdc: Type.Optional(Type.Record(Type.String(), Type.String())),
});
const LogPageSchema = Type.Object({
  records: Type.Array(LogRecordSchema),
  size: Type.Integer({ description: "Records in the buffer" }),
  capacity: Type.Integer(),
  level: Type.String({ description: "The minimum level applied" }),
  logger: Type.String({ description: "The logger prefix applied; empty for every logger" }),
});

/** The level filter of a query; 422 for a name that is no level. */
export function parseLevel(text: string | undefined): LogLevel | undefined {
  if (text === undefined || text === "") return undefined;
  const upper = text.trim().toUpperCase();
  if (!(LOG_LEVELS as readonly string[]).includes(upper)) throw validationError(`level: must be one of ${LOG_LEVELS.join(", ")}`);
  return upper as LogLevel;
}

function toQuery(query: { level?: string; logger?: string; limit?: number; afterSeq?: number }): LogQuery {
  return { level: parseLevel(query.level), logger: query.logger || undefined, limit: query.limit, afterSeq: query.afterSeq };
}

/** The hono SSE stream as the log hub writes to it. */
function sseResponse(c: AppContext, run: (writer: LogStreamWriter) => Promise<void>): Response {
  const outgoing = (c.env as { outgoing?: { destroy(): void } } | undefined)?.outgoing;
  return streamSSE(c, async (stream) =>
    run({
      write: (text) => stream.write(text),
      onAbort: (listener) => stream.onAbort(listener),
      get aborted() {
        return stream.aborted || stream.closed;
      },
      cut: () => {
        stream.abort();
        outgoing?.destroy();
      },
    }),
  );
}

/** Mounts the log routes. */
export function logRoutes(deps: LogRoutesDeps): (app: Hono<AppEnv>, registry: RouteRegistry) => void {
  const controllerSource: LogSource = {
    read: async (query) => {
      const recent = deps.logs.recent();
      return { records: selectRecords(recent, query), size: recent.length, capacity: deps.logs.capacity };
    },
    follow: (listener) => deps.logs.tail(listener),
  };

  /** Redeems the ticket and serves `source`; a refused ticket gets the error event. */
  const serveStream = async (c: AppContext, ticketText: string | undefined, source: () => LogSource, query: LogQuery): Promise<Response> => {
    const ticket = ticketText ? await deps.tickets.redeem(ticketText, "logs") : null;
    return sseResponse(c, async (writer) => {
      if (ticket === null) {
        await writer.write(logFrame("error", { message: "Unauthorized" }));
        return;
      }
      await deps.hub.serve(writer, source(), query);
    });
  };

  return (app, registry) => {
    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/system/logs",
        summary: "Recent controller log records (ring buffer of 2,000), filtered by level, logger prefix and count",
        tag,
        permission: "system.logs.view",
        query: ReadQuery,
        response: LogPageSchema,
      },
      async ({ query }) => {
        const filters = toQuery(query);
        const page = await controllerSource.read(filters);
        return { ...page, level: filters.level ?? deps.logs.level, logger: filters.logger ?? "" };
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/system/logs/ticket",
        summary: "A single-use ticket (30 s) for the log streams (controller and daemon tails)",
        tag,
        permission: "system.logs.view",
        response: Type.Object({ ticket: Type.String(), expiresAt: Type.String({ format: "date-time" }) }),
      },
      async ({ principal }) => deps.tickets.issue({ kind: "logs", username: principal?.username ?? "unknown" }),
    );

    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/system/logs/stream",
        summary: "SSE tail of the controller log: the buffered records that match, then new ones (query ticket from GET /api/v1/system/logs/ticket)",
        tag,
        auth: "public",
        query: StreamQuery,
      },
      async ({ query, c }) => serveStream(c, query.ticket, () => controllerSource, toQuery(query)),
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/v1/system/logs/share",
        summary: "Uploads the redacted controller log (filtered like GET /api/v1/system/logs) to the paste service and answers its link",
        tag,
        permission: "share.invoke",
        body: Type.Object({ ...FilterFields, ...ShareOptionsSchema.properties }, { additionalProperties: false }),
        response: ShareResultSchema,
      },
      async ({ body, principal, c }) => {
        if (!principal?.permissions.has("system.logs.view")) throw forbidden("Missing permission: system.logs.view");
        deps.share.requireEnabled();
        const text = await deps.diagnostics.logText(deps.logs.recent(), toQuery(body));
        const shared = await deps.share.share(
          "logs",
          text,
          { expiry: body.expiry, public: body.public, burnAfterRead: body.burnAfterRead },
          principal.username,
        );
        await auditShareCreated(deps.audit, c, shared);
        return shared;
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/nodes/:id/logs",
        summary:
          "Recent log records of a node's daemon (mirrored over its stream, read from the controller holding it; 503 LOG_HOLDER_UNAVAILABLE when that controller cannot be asked), filtered like GET /api/v1/system/logs",
        tag,
        permission: "system.logs.view",
        params: NodeParams,
        query: ReadQuery,
        response: LogPageSchema,
      },
      async ({ params, query }) => {
        const filters = toQuery(query);
        await deps.requireNode(params.id);
        const read = await deps.nodeLogs.read(params.id, filters);
        return { records: read.records, size: read.size, capacity: read.capacity, level: filters.level ?? "TRACE", logger: filters.logger ?? "" };
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/nodes/:id/logs/stream",
        summary:
          "SSE tail of a node's daemon log (query ticket from GET /api/v1/system/logs/ticket); on a controller without the daemon's stream it polls the holder every 500 ms",
        tag,
        auth: "public",
        params: NodeParams,
        query: StreamQuery,
      },
      async ({ params, query, c }) => {
        const filters = toQuery(query);
        await deps.requireNode(params.id);
        // A holder that cannot be asked is answered here, before the ticket is used.
        await deps.nodeLogs.read(params.id, { limit: 1 });
        return serveStream(c, query.ticket, () => deps.nodeLogs.source(params.id, filters), filters);
      },
    );
  };
}

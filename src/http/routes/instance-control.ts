/**
 * Instance operations under /api/v1/services (spec document 1, "Instances"): stop, force-stop, a
 * console command, and the console stream. The stream is Server-Sent Events authenticated by a
 * single-use ticket (`POST /api/v1/services/{id}/console/ticket`, valid 30 s), because a browser
 * cannot put a bearer token on an EventSource. Frames: `event: console` with `id` = sequence and
 * data `{instanceId, line, stream, timestampMs}`; the latest lines first (query `tail`: how many; 0
 * for none), then live ones. A bad
 * ticket gets one `event: error` with `{"message":"Unauthorized"}` and the stream closes.
 */
import type { Hono } from "hono";
import { streamSSE, type SSEStreamingApi } from "hono/streaming";
import { Type } from "@sinclair/typebox";
import type { AuditRecorder } from "../../audit/types.js";
import type { Tickets } from "../../coordination/tickets.js";
import type { InstanceService } from "../../domain/instances/instance-service.js";
import { InstanceSchema } from "../../domain/instances/instance-schemas.js";
import type { ConsoleEntry, ConsoleHub } from "../../gateway/console-hub.js";
import type { MetricsService } from "../../metrics/metrics.js";
import { addRoute, type RouteRegistry } from "../route.js";
import { audited } from "../audited.js";
import type { AppEnv } from "../types.js";
import { SSE_KEEP_ALIVE } from "../../shared/sse.js";
import { systemClock, type Clock } from "../../shared/clock.js";

const tag = "Services";
const IdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 256 }) });

/** Console streams open at once on this controller (spec: more than 100 are refused). */
export const consoleStreamsMax = 100;
/** A comment line every this many ms keeps proxies from closing an idle stream. */
export const consoleKeepAliveMs = 15_000;
/** Lines waiting for a slow client; older ones are dropped beyond this. */
export const consoleClientQueueLinesMax = 1_000;
/** Longest console command line accepted (the daemon's stdin bound). */
export const consoleCommandCharsMax = 4_096;

/** What the routes need of the scheduler. */
export interface InstanceOperations {
  stopInstance(id: string, force: boolean): Promise<void>;
  sendCommand(id: string, line: string): Promise<void>;
}

/** Payload of a console ticket. */
export interface ConsoleTicket {
  readonly kind: "console";
  readonly instanceId: string;
  readonly username: string;
  readonly [field: string]: unknown;
}

export interface InstanceControlDeps {
  /** Times the console stream's keep-alives; the system clock by default. */
  clock?: Clock;
  instances: InstanceService;
  operations: InstanceOperations;
  console: ConsoleHub;
  tickets: Tickets<ConsoleTicket>;
  audit: AuditRecorder;
  metrics: Pick<MetricsService, "sseClientsConnected">;
}

/** Mounts stop, force-stop, command, console ticket and console stream. */
export function instanceControlRoutes(deps: InstanceControlDeps): (app: Hono<AppEnv>, registry: RouteRegistry) => void {
  let openStreams = 0;
  return (app, registry) => {
    for (const force of [false, true]) {
      const action = force ? "instance.force-stop" : "instance.stop";
      addRoute(
        app,
        registry,
        {
          method: "post",
          path: `/api/v1/services/:id/${force ? "force-stop" : "stop"}`,
          summary: force ? "Kill an instance at once" : "Stop an instance: the platform's stop command, then SIGTERM, then SIGKILL",
          tag,
          permission: "instances.stop",
          params: IdParams,
          response: InstanceSchema,
          successStatus: 202,
        },
        async ({ params, c }) => {
          const before = await deps.instances.get(params.id);
          await deps.operations.stopInstance(params.id, force);
          await audited(deps.audit, c, { action, resourceType: "instance", resourceId: params.id, details: { group: before.group, node: before.node } });
          return deps.instances.get(params.id);
        },
      );
    }

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/v1/services/:id/command",
        summary: "Write a command line to the instance's standard input",
        tag,
        permission: "instances.command",
        params: IdParams,
        body: Type.Object(
          { command: Type.String({ minLength: 1, maxLength: consoleCommandCharsMax, pattern: "^[^\\r\\n]*\\S[^\\r\\n]*$" }) },
          { additionalProperties: false },
        ),
        response: Type.Object({ id: Type.String(), command: Type.String(), sent: Type.Boolean() }),
      },
      async ({ params, body }) => {
        await deps.instances.get(params.id);
        await deps.operations.sendCommand(params.id, body.command);
        return { id: params.id, command: body.command, sent: true };
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/v1/services/:id/console/ticket",
        summary: "A single-use ticket (30 s) for the instance's console stream",
        tag,
        permission: "instances.console",
        params: IdParams,
        response: Type.Object({ ticket: Type.String(), expiresAt: Type.String({ format: "date-time" }) }),
      },
      async ({ params, principal }) => {
        await deps.instances.get(params.id);
        return deps.tickets.issue({ kind: "console", instanceId: params.id, username: principal?.username ?? "unknown" });
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/services/:id/console",
        summary: "SSE stream of the instance's console (query ticket from POST …/console/ticket)",
        tag,
        auth: "public",
        params: IdParams,
        query: Type.Object({
          ticket: Type.Optional(Type.String({ maxLength: 256 })),
          /** Buffered lines sent first (default: all the controller keeps); 0 sends only new lines. */
          tail: Type.Optional(Type.Integer({ minimum: 0, maximum: 10_000 })),
        }),
      },
      async ({ params, query, c }) => {
        const ticket = query.ticket ? await deps.tickets.redeem(query.ticket, "console") : null;
        const valid = ticket !== null && ticket.instanceId === params.id;
        return streamSSE(c, async (stream) => {
          if (!valid) return refuse(stream, "Unauthorized");
          if (openStreams >= consoleStreamsMax) return refuse(stream, "Too many connections");
          openStreams++;
          deps.metrics.sseClientsConnected.inc();
          try {
            await streamConsole(stream, deps.console, params.id, query.tail, deps.clock);
          } finally {
            openStreams--;
            deps.metrics.sseClientsConnected.dec();
          }
        });
      },
    );
  };
}

async function refuse(stream: SSEStreamingApi, message: string): Promise<void> {
  await stream.writeSSE({ event: "error", data: JSON.stringify({ message }) });
}

/** Sends the recent lines, then every new line, until the client goes away. */
async function streamConsole(stream: SSEStreamingApi, hub: ConsoleHub, instanceId: string, tail?: number, clock: Clock = systemClock): Promise<void> {
  const queue: ConsoleEntry[] = [];
  let wake: (() => void) | null = null;
  let stopListening: () => void;
  try {
    stopListening = hub.listen(instanceId, (entry) => {
      queue.push(entry);
      if (queue.length > consoleClientQueueLinesMax) queue.shift();
      wake?.();
    });
  } catch {
    // The hub throws only when the instance has its most console listeners: the client is told so.
    return refuse(stream, "Too many connections");
  }
  let closed = false;
  stream.onAbort(() => {
    closed = true;
    wake?.();
  });
  // A keep-alive that cannot be written means the client is gone; onAbort ends the stream.
  const keepAlive = clock.setInterval(() => void stream.write(SSE_KEEP_ALIVE).catch(() => undefined), consoleKeepAliveMs);
  try {
    await stream.writeSSE({ event: "connected", data: JSON.stringify({ instanceId }) });
    const buffered = hub.recent(instanceId);
    const lastBacklogSeq = buffered.at(-1)?.seq ?? 0;
    const backlog = tail === undefined ? buffered : tail === 0 ? [] : buffered.slice(-tail);
    for (const entry of backlog) await send(stream, entry);
    while (!closed) {
      if (queue.length === 0) {
        await new Promise<void>((resolve) => (wake = resolve));
        wake = null;
        continue;
      }
      const entry = queue.shift() as ConsoleEntry;
      if (entry.seq > lastBacklogSeq) await send(stream, entry);
    }
  } finally {
    keepAlive.cancel();
    stopListening();
  }
}

function send(stream: SSEStreamingApi, entry: ConsoleEntry): Promise<void> {
  return stream.writeSSE({
    event: "console",
    id: String(entry.seq),
    data: JSON.stringify({ instanceId: entry.instanceId, line: entry.line, stream: entry.stream, timestampMs: entry.timestampMs }),
  });
}

/**
 * An instance's log, from the daemon of its node (docs/decisions/logs.md, "Instance logs"):
 *
 * - `GET /api/v1/services/{id}/logs?tail=N` answers the last N lines (1 to 2,000, default 200) of
 *   the log the daemon keeps for the instance: its console output and the daemon's own `[cloud]`
 *   lines (state changes, how it ended, a start it refused), kept after the instance ended. When
 *   the node cannot be asked (not connected, no answer) the controller's console buffer (the last
 *   100 lines it saw) answers instead, and `source` says which one it is.
 * - `GET /api/v1/services/{id}/logs/stream?ticket=…&tail=N` (a console ticket: `POST
 *   …/console/ticket`) sends the same lines as `event: log` frames, then each new console line as
 *   it comes; when the instance ends (STOPPED, CRASHED) the daemon's lines written meanwhile (its
 *   `[cloud]` lines: states, how it ended) follow and the stream closes with `event: end`.
 *
 * Permission `instances.console`, like the console.
 */
import type { Hono } from "hono";
import { streamSSE, type SSEStreamingApi } from "hono/streaming";
import { Type } from "@sinclair/typebox";
import type { Tickets } from "../../coordination/tickets.js";
import type { InstanceService } from "../../domain/instances/instance-service.js";
import { FINISHED_STATES } from "../../domain/instances/instance-schemas.js";
import type { EventBus } from "../../events/types.js";
import type { ConsoleHub } from "../../gateway/console-hub.js";
import type { MetricsService } from "../../metrics/metrics.js";
import type { Clock } from "../../shared/clock.js";
import { idleUntilWoken, SSE_KEEP_ALIVE } from "../../shared/sse.js";
import type { CommandResult, InstanceCommand } from "../../wire/daemon-proto.js";
import { addRoute, type RouteRegistry } from "../route.js";
import type { AppEnv } from "../types.js";
import type { ConsoleTicket } from "./instance-control.js";

const tag = "Services";
const IdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 256 }) });
/** Lines one answer carries at most (the daemon's bound too). */
export const instanceLogTailMax = 2_000;
/** Lines answered when `tail` is not given. */
export const instanceLogTailDefault = 200;
/** Log streams open at once on this controller. */
export const instanceLogStreamsMax = 100;
/** A comment line every this many ms keeps proxies from closing an idle stream. */
export const instanceLogKeepAliveMs = 15_000;
/** Lines waiting for a slow client; older ones are dropped beyond this. */
export const instanceLogQueueLinesMax = 1_000;
/** After the instance ended, how long the daemon gets to write its last lines before they are read. */
export const instanceLogSettleMs = 500;

const TailQuery = Type.Object({ tail: Type.Optional(Type.Integer({ minimum: 1, maximum: instanceLogTailMax })) });
const LogLine = Type.Object({ line: Type.String(), stream: Type.String(), timestampMs: Type.Integer() });

/** One line of an instance log. */
export type InstanceLogLine = { line: string; stream: string; timestampMs: number };

/** The answer of `GET …/logs`. */
export interface InstanceLogAnswer {
  instanceId: string;
  node: string;
  /** `daemon`: the node's instance log; `controller`: the console buffer of this controller (the node could not be asked). */
  source: "daemon" | "controller";
  /** Why the daemon's log is not the source; absent when it is. */
  note?: string;
  lines: InstanceLogLine[];
}

export interface InstanceLogDeps {
  instances: Pick<InstanceService, "get">;
  /** Commands to daemons, forwarded to the controller holding the stream when that is another one. */
  daemons: { sendCommand(nodeId: string, command: InstanceCommand): Promise<CommandResult> };
  console: ConsoleHub;
  tickets: Tickets<ConsoleTicket>;
  events: Pick<EventBus, "subscribe">;
  metrics: Pick<MetricsService, "sseClientsConnected">;
  clock: Clock;
}

/** The last `tail` lines of an instance's log: the daemon's, else this controller's console buffer. */
export async function readInstanceLog(deps: InstanceLogDeps, instanceId: string, tail: number): Promise<InstanceLogAnswer> {
  const instance = await deps.instances.get(instanceId);
  const result = await deps.daemons
    .sendCommand(instance.node, { type: "read_instance_log", body: { instance_id: instanceId, tail_lines: tail } })
    .catch((err: unknown): CommandResult => ({ command_id: "", ok: false, error_code: "COMMAND_FAILED", message: (err as Error).message }));
  if (result.ok) {
    const lines = (result.log_lines ?? []).map((l) => ({ line: l.line, stream: l.stream, timestampMs: Number(l.timestamp_ms) }));
    return { instanceId, node: instance.node, source: "daemon", lines };
  }
  const buffered = deps.console
    .recent(instanceId)
    .slice(-tail)
    .map((e) => ({ line: e.line, stream: e.stream, timestampMs: e.timestampMs }));
  const why =
    result.error_code === "NOT_FOUND"
      ? `node ${instance.node} keeps no log of it`
      : `node ${instance.node} could not be asked (${result.error_code}: ${result.message})`;
  return { instanceId, node: instance.node, source: "controller", note: `${why}; these are the console lines this controller saw`, lines: buffered };
}

/** Mounts the instance log routes. */
export function instanceLogRoutes(deps: InstanceLogDeps): (app: Hono<AppEnv>, registry: RouteRegistry) => void {
  let openStreams = 0;
  return (app, registry) => {
    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/services/:id/logs",
        summary: `The instance's log from its node's daemon: the last \`tail\` lines (1 to ${instanceLogTailMax}, default ${instanceLogTailDefault}), kept after it ended`,
        tag,
        permission: "instances.console",
        params: IdParams,
        query: TailQuery,
        response: Type.Object({
          instanceId: Type.String(),
          node: Type.String(),
          source: Type.Union([Type.Literal("daemon"), Type.Literal("controller")]),
          note: Type.Optional(Type.String()),
          lines: Type.Array(LogLine),
        }),
      },
      ({ params, query }) => readInstanceLog(deps, params.id, query.tail ?? instanceLogTailDefault),
    );

    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/services/:id/logs/stream",
        summary: "SSE: the instance's log tail, then new lines until it ends (query ticket from POST …/console/ticket, tail)",
        tag,
        auth: "public",
        params: IdParams,
        query: Type.Object({ ticket: Type.Optional(Type.String({ maxLength: 256 })), ...TailQuery.properties }),
      },
      async ({ params, query, c }) => {
        const ticket = query.ticket ? await deps.tickets.redeem(query.ticket, "console") : null;
        const valid = ticket !== null && ticket.instanceId === params.id;
        return streamSSE(c, async (stream) => {
          if (!valid) return refuse(stream, "Unauthorized");
          if (openStreams >= instanceLogStreamsMax) return refuse(stream, "Too many connections");
          openStreams++;
          deps.metrics.sseClientsConnected.inc();
          try {
            await followLog(stream, deps, params.id, query.tail ?? instanceLogTailDefault);
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

/** Sends the tail, then new lines, until the client goes away or the instance ends. */
async function followLog(stream: SSEStreamingApi, deps: InstanceLogDeps, instanceId: string, tail: number): Promise<void> {
  const queue: InstanceLogLine[] = [];
  let ended = false;
  let closed = false;
  let wake: (() => void) | null = null;
  const push = (line: InstanceLogLine) => {
    queue.push(line);
    if (queue.length > instanceLogQueueLinesMax) queue.shift();
    wake?.();
  };
  let stopConsole: () => void;
  try {
    stopConsole = deps.console.listen(instanceId, (e) => push({ line: e.line, stream: e.stream, timestampMs: e.timestampMs }));
  } catch {
    // The hub throws only when the instance has its most console listeners: the client is told so.
    return refuse(stream, "Too many connections");
  }
  const states = deps.events.subscribe("INSTANCE_STATE_CHANGED", (event) => {
    if (event.data.instanceId !== instanceId || !FINISHED_STATES.has(String(event.data.newState) as never)) return;
    ended = true;
    wake?.();
  });
  stream.onAbort(() => {
    closed = true;
    wake?.();
  });
  const sent = new SentLines();
  const startedMs = deps.clock.nowMs();
  try {
    const first = await readInstanceLog(deps, instanceId, tail);
    await stream.writeSSE({ event: "connected", data: JSON.stringify({ instanceId, node: first.node, source: first.source, note: first.note }) });
    for (const line of first.lines) await send(stream, instanceId, line, sent);
    // The last read leaves out what is older than what the first one sent (or than this stream).
    const sinceMs = first.lines[0]?.timestampMs ?? startedMs;
    if (FINISHED_STATES.has((await deps.instances.get(instanceId)).state)) ended = true;
    while (!closed && !ended) {
      while (queue.length > 0 && !closed) {
        const line = queue.shift()!;
        if (!sent.seen(line)) await send(stream, instanceId, line, sent);
      }
      if (closed || ended) break;
      const idle = await idleUntilWoken(deps.clock, instanceLogKeepAliveMs, (w) => (wake = w));
      wake = null;
      if (idle) await stream.write(SSE_KEEP_ALIVE).catch(() => undefined);
    }
    if (ended && !closed) {
      // The daemon's last lines (how it ended) are read once it had a moment to write them.
      await new Promise<void>((resolve) => deps.clock.setTimeout(resolve, instanceLogSettleMs));
      const last = await readInstanceLog(deps, instanceId, instanceLogQueueLinesMax);
      const unsent = [...queue, ...last.lines].filter((line) => line.timestampMs >= sinceMs && !sent.seen(line));
      for (const line of unsent.sort((a, b) => a.timestampMs - b.timestampMs)) if (!sent.seen(line)) await send(stream, instanceId, line, sent);
      await stream.writeSSE({ event: "end", data: JSON.stringify({ instanceId }) });
    }
  } finally {
    stopConsole();
    states.unsubscribe();
  }
}

/**
 * The lines a stream sent (time and text: a console line has the same in the daemon's log and on
 * the console), so one arriving twice (in the daemon's tail and live, live and in the last read) is
 * sent once. Bounded: the oldest are forgotten beyond {@link sentLinesRememberedMax}.
 */
class SentLines {
  private readonly keys = new Set<string>();

  seen(line: InstanceLogLine): boolean {
    return this.keys.has(`${line.timestampMs}|${line.line}`);
  }

  add(line: InstanceLogLine): void {
    this.keys.add(`${line.timestampMs}|${line.line}`);
    if (this.keys.size > sentLinesRememberedMax) this.keys.delete(this.keys.values().next().value as string);
  }
}

/** Lines a stream remembers having sent (twice what one read can answer). */
const sentLinesRememberedMax = 2 * instanceLogTailMax;

async function send(stream: SSEStreamingApi, instanceId: string, line: InstanceLogLine, sent: SentLines): Promise<void> {
  sent.add(line);
  await stream.writeSSE({ event: "log", data: JSON.stringify({ instanceId, ...line }) });
}

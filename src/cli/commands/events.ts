/**
 * `cloudctl events`: the controller's event stream (spec document 3, "Event stream"). Without
 * `--follow` it prints the events the controller still buffers for replay (at most 2,048) and
 * exits; with `--follow` it prints new events as they come until interrupted (with `--since`, the
 * buffered ones since then first). Filters: `--type` (repeatable or comma-separated), `--group`
 * (events whose `group` or `groupName` is it), `--since` (a duration like 10m, or a date). The
 * periodic reports (NODE_STATUS, NODE_CACHE_STATUS, INSTANCE_METRICS) are left out unless `--type`
 * names them or `--all` is given. A table shows SEQ, TIME, TYPE, GROUP and each type's key fields
 * in full (EVENT); `--json` prints the stream's event objects, one per line. A refused ticket
 * exits 2, like a 401.
 */
import type { Command } from "commander";
import { CliError } from "../exit-codes.js";
import type { HttpClient } from "../http-client.js";
import { collect, commaList, sinceToIso } from "../options.js";
import type { Output } from "../render.js";
import type { RuntimeFactory } from "../runtime.js";
import { openSse } from "../sse-stream.js";
import { eventSummary, groupOf } from "./event-summary.js";

/** One event as the stream sends it. */
export interface StreamedEvent {
  type: string;
  sequence: number;
  source?: string | null;
  timestamp?: string | null;
  data?: unknown;
  earliestSequence?: number;
  latestSequence?: number;
  lastSequence?: number;
}

/** Types reported on a timer rather than on a change: shown only when asked for. */
export const PERIODIC_EVENT_TYPES: ReadonlySet<string> = new Set(["NODE_STATUS", "NODE_CACHE_STATUS", "INSTANCE_METRICS"]);

/** What `events` prints: the filters of its flags. */
export interface EventFilter {
  types: string[];
  group?: string;
  /** ISO 8601: events at or after. */
  since?: string;
  all?: boolean;
}

/** Whether `event` passes `filter` (RESYNC_REQUIRED always does: it is about the stream itself). */
export function eventWanted(event: StreamedEvent, filter: EventFilter): boolean {
  if (event.type === "RESYNC_REQUIRED") return true;
  if (filter.types.length > 0 ? !filter.types.includes(event.type) : !filter.all && PERIODIC_EVENT_TYPES.has(event.type)) return false;
  if (filter.group !== undefined && groupOf(event) !== filter.group) return false;
  if (filter.since !== undefined && (event.timestamp ?? "") < filter.since) return false;
  return true;
}

/** Row cells of an event: SEQ, TIME, TYPE, GROUP, EVENT (the key fields, never cut). */
export function eventRow(event: StreamedEvent): string[] {
  return [String(event.sequence ?? ""), event.timestamp ?? "", event.type, groupOf(event) ?? "", eventSummary(event)];
}

const headers = ["SEQ", "TIME", "TYPE", "GROUP", "EVENT"];

interface Stream {
  /** Sequence of the newest event when the stream opened. */
  latestSequence: number;
  next(): Promise<StreamedEvent | null>;
  close(): void;
}

/** Opens the stream after `lastSequence` (null: new events only). */
async function openStream(client: HttpClient, lastSequence: number | null): Promise<Stream> {
  const ticketResponse = await client.post<{ ticket?: string }>("/api/v1/events/ticket");
  const ticket = ticketResponse.data?.ticket;
  if (!ticket) throw new CliError("event ticket response carried no ticket");
  const sse = await openSse(client, "/api/v1/events/stream", { ticket, lastSequence: lastSequence ?? undefined }, "event stream");
  const first = await sse.next();
  if (!first) throw new CliError("the event stream closed before it started");
  const latestSequence = Number((JSON.parse(first.data) as { latestSequence?: number }).latestSequence ?? 0);
  return {
    latestSequence,
    async next() {
      const frame = await sse.next();
      return frame ? (JSON.parse(frame.data) as StreamedEvent) : null;
    },
    close: () => sse.close(),
  };
}

/** Opens the stream at the oldest event still buffered (after a RESYNC_REQUIRED from 0, just before it). */
async function openAtOldest(client: HttpClient): Promise<{ stream: Stream; first: StreamedEvent | null }> {
  let stream = await openStream(client, 0);
  let first = stream.latestSequence > 0 ? await stream.next() : null;
  if (first?.type === "RESYNC_REQUIRED") {
    // The buffer no longer starts at 1: open again just before its oldest event.
    stream.close();
    stream = await openStream(client, Math.max(0, (first.earliestSequence ?? 1) - 1));
    first = stream.latestSequence > 0 ? await stream.next() : null;
  }
  return { stream, first };
}

/** Reads the buffered events: those after the oldest still buffered, up to the newest at opening. */
async function readBuffered(client: HttpClient): Promise<StreamedEvent[]> {
  const { stream, first } = await openAtOldest(client);
  const events: StreamedEvent[] = [];
  try {
    for (let event = first; event; event = await stream.next()) {
      if (event.type !== "RESYNC_REQUIRED") events.push(event);
      if (event.sequence >= stream.latestSequence) break;
    }
  } finally {
    stream.close();
  }
  return events;
}

const followWidths = [8, 24, 26, 14];

function printLine(out: Output, event: StreamedEvent): void {
  if (out.json) return out.line(JSON.stringify(event));
  const cells = eventRow(event);
  out.line(cells.map((cell, i) => (i < cells.length - 1 ? cell.padEnd(followWidths[i]) : cell)).join("  "));
}

/** Registers `events`. */
export function registerEventCommands(program: Command, runtime: RuntimeFactory): void {
  program
    .command("events")
    .description("print the controller's event stream: the buffered events, or new ones with --follow")
    .option("--type <type>", "only events of these types (repeatable or comma-separated; e.g. INSTANCE_STATE_CHANGED or MODULE:ACTION)", collect, [])
    .option("--group <name>", "only events about this group")
    .option("--since <when>", "only events at or after: a duration (10m, 2h) or an ISO 8601 date", (v) => sinceToIso(v))
    .option("--all", "also the periodic reports (NODE_STATUS, NODE_CACHE_STATUS, INSTANCE_METRICS)")
    .option("-f, --follow", "print new events as they come until interrupted (with --since: the buffered ones since then first)")
    .action(async (opts: { type: string[]; group?: string; since?: string; all?: boolean; follow?: boolean }, cmd: Command) => {
      const rt = runtime(cmd);
      const client = rt.client();
      const filter: EventFilter = { types: opts.type.flatMap(commaList), group: opts.group, since: opts.since, all: opts.all };
      if (!opts.follow) {
        const events = (await readBuffered(client)).filter((event) => eventWanted(event, filter));
        if (rt.json) {
          for (const event of events) rt.out.line(JSON.stringify(event));
          return;
        }
        return rt.out.table(headers, events.map(eventRow));
      }
      const { stream, first } = opts.since !== undefined ? await openAtOldest(client) : { stream: await openStream(client, null), first: null };
      if (!rt.json) rt.out.line(rt.out.colors.dim(headers.map((h, i) => (i < followWidths.length ? h.padEnd(followWidths[i]) : h)).join("  ")));
      try {
        for (let event = first ?? (await stream.next()); event; event = await stream.next()) {
          if (!eventWanted(event, filter)) continue;
          if (event.type === "RESYNC_REQUIRED" && !rt.json)
            rt.out.note(`resync required: events after ${event.lastSequence} are no longer buffered; refetch state`);
          else printLine(rt.out, event);
        }
      } finally {
        stream.close();
      }
      rt.out.note(rt.out.colors.dim("event stream closed"));
    });
}

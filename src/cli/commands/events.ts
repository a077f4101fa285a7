/**
 * `cloudctl events [--type T] [--follow]`: the controller's event stream (spec document 3, "Event
 * stream"). Without `--follow` it prints the events the controller still buffers for replay (at
 * most 2,048) and exits; with `--follow` it prints new events as they come until interrupted.
 * A table by default (SEQ, TIME, TYPE, SOURCE, DATA; rows one by one when following), JSON lines
 * (the stream's event objects) with `--json`. A refused ticket exits 2, like a 401.
 */
import type { Command } from "commander";
import { SseParser } from "../console-session.js";
import { CliError, ExitCode } from "../exit-codes.js";
import { errorFromResponse, type HttpClient } from "../http-client.js";
import type { Output } from "../render.js";
import type { RuntimeFactory } from "../runtime.js";

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

/** Characters of the DATA column before it is cut. */
const dataColumnChars = 80;

/** Row cells of an event. */
export function eventRow(event: StreamedEvent): string[] {
  const data =
    event.type === "RESYNC_REQUIRED"
      ? { lastSequence: event.lastSequence, earliestSequence: event.earliestSequence, latestSequence: event.latestSequence }
      : (event.data ?? {});
  let text = JSON.stringify(data);
  if (text.length > dataColumnChars) text = `${text.slice(0, dataColumnChars - 1)}…`;
  return [String(event.sequence ?? ""), event.timestamp ?? "", event.type, event.source ?? "", text];
}

const headers = ["SEQ", "TIME", "TYPE", "SOURCE", "DATA"];

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
  const query: Record<string, string> = { ticket };
  if (lastSequence !== null) query.lastSequence = String(lastSequence);
  const url = client.url("/api/v1/events/stream", query);
  const requestHeaders = { ...client.headers(true), accept: "text/event-stream" };
  client.logRequest("GET", url, requestHeaders);
  const abort = new AbortController();
  let response: Response;
  try {
    response = await fetch(url, { headers: requestHeaders, signal: abort.signal });
  } catch (error) {
    throw new CliError(`cannot open the event stream: ${(error as Error).message}`, ExitCode.connection);
  }
  if (!response.ok || !response.body) throw errorFromResponse(response.status, response.statusText, await response.text());
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const parser = new SseParser();
  const pending: { event: string; data: string }[] = [];
  const read = async (): Promise<{ event: string; data: string } | null> => {
    while (pending.length === 0) {
      let chunk: Awaited<ReturnType<typeof reader.read>>;
      try {
        chunk = await reader.read();
      } catch {
        return null; // closed here or dropped: the stream ended
      }
      if (chunk.done) return null;
      pending.push(...parser.push(decoder.decode(chunk.value, { stream: true })));
    }
    return pending.shift() ?? null;
  };
  const refused = (data: string) => {
    const message = (JSON.parse(data) as { message?: string }).message ?? data;
    return new CliError(`event stream refused: ${message}`, message === "Unauthorized" ? ExitCode.unauthorized : ExitCode.failure);
  };
  const first = await read();
  if (!first) throw new CliError("the event stream closed before it started");
  if (first.event === "error") throw refused(first.data);
  const latestSequence = Number((JSON.parse(first.data) as { latestSequence?: number }).latestSequence ?? 0);
  return {
    latestSequence,
    async next() {
      const frame = await read();
      if (!frame) return null;
      if (frame.event === "error") throw refused(frame.data);
      return JSON.parse(frame.data) as StreamedEvent;
    },
    close: () => abort.abort(),
  };
}

/** Reads the buffered events: those after the oldest still buffered, up to the newest at opening. */
async function readBuffered(client: HttpClient): Promise<StreamedEvent[]> {
  let stream = await openStream(client, 0);
  const events: StreamedEvent[] = [];
  try {
    let event = stream.latestSequence > 0 ? await stream.next() : null;
    if (event?.type === "RESYNC_REQUIRED") {
      // The buffer no longer starts at 1: open again just before its oldest event.
      stream.close();
      stream = await openStream(client, Math.max(0, (event.earliestSequence ?? 1) - 1));
      event = stream.latestSequence > 0 ? await stream.next() : null;
    }
    while (event) {
      if (event.type !== "RESYNC_REQUIRED") events.push(event);
      if (event.sequence >= stream.latestSequence) break;
      event = await stream.next();
    }
  } finally {
    stream.close();
  }
  return events;
}

function printLine(out: Output, event: StreamedEvent, widths: number[]): void {
  if (out.json) return out.line(JSON.stringify(event));
  const cells = eventRow(event);
  out.line(cells.map((cell, i) => (i < cells.length - 1 ? cell.padEnd(widths[i]) : cell)).join("  "));
}

/** Registers `events`. */
export function registerEventCommands(program: Command, runtime: RuntimeFactory): void {
  program
    .command("events")
    .description("print the controller's event stream: the buffered events, or new ones with --follow")
    .option("--type <type>", "only events of this type (e.g. INSTANCE_STATE_CHANGED or MODULE:ACTION)")
    .option("-f, --follow", "print new events as they come until interrupted")
    .action(async (opts: { type?: string; follow?: boolean }, cmd: Command) => {
      const rt = runtime(cmd);
      const client = rt.client();
      const wanted = (event: StreamedEvent) => opts.type === undefined || event.type === opts.type || event.type === "RESYNC_REQUIRED";
      if (!opts.follow) {
        const events = (await readBuffered(client)).filter(wanted);
        if (rt.json) {
          for (const event of events) rt.out.line(JSON.stringify(event));
          return;
        }
        return rt.out.table(headers, events.map(eventRow));
      }
      const stream = await openStream(client, null);
      const widths = [8, 24, 28, 20];
      if (!rt.json) rt.out.line(rt.out.colors.dim(headers.map((h, i) => (i < widths.length ? h.padEnd(widths[i]) : h)).join("  ")));
      try {
        for (let event = await stream.next(); event; event = await stream.next()) {
          if (!wanted(event)) continue;
          if (event.type === "RESYNC_REQUIRED" && !rt.json)
            rt.out.note(`resync required: events after ${event.lastSequence} are no longer buffered; refetch state`);
          else printLine(rt.out, event, widths);
        }
      } finally {
        stream.close();
      }
      rt.out.note(rt.out.colors.dim("event stream closed"));
    });
}

/**
 * `cloudctl instance console`: attaches to an instance's console. A single-use ticket is obtained
 * first, then the SSE stream is read and printed; typed lines are posted as commands. Ctrl-Q
 * (byte 0x11) detaches. On a terminal stdin is put in raw mode (Ctrl-C detaches too); on a pipe
 * stdin is read as lines and a 0x11 byte detaches after the lines before it were sent. The
 * controller's frames: `event: connected`, then `event: console` with data
 * `{instanceId, line, stream, timestampMs}`; a refused ticket gets one `event: error`.
 */
import { CliError, ExitCode } from "./exit-codes.js";
import { errorFromResponse, segment, type HttpClient } from "./http-client.js";
import type { Output } from "./render.js";

/** The detach key: Ctrl-Q. */
export const detachByte = 0x11;
const interruptByte = 0x03;
/**
 * Longest line (bytes) collected from stdin before it is sent anyway: the controller's bound on a
 * console command (4096 characters), so a long line is never refused for its length.
 */
export const inputLineBytesMax = 4_096;
/** Longest SSE field line kept in memory; a longer line is cut (bounds the stream buffer). */
export const sseLineCharsMax = 1024 * 1024;

/** One parsed server-sent event. */
export interface SseEvent {
  event: string;
  data: string;
}

/** Incremental SSE parser: feed text chunks, get complete events. */
export class SseParser {
  private buffer = "";
  private data: string[] = [];
  private event = "message";

  push(chunk: string): SseEvent[] {
    this.buffer += chunk;
    const events: SseEvent[] = [];
    let newline: number;
    while ((newline = this.buffer.search(/\r?\n|\r/)) >= 0) {
      const line = this.buffer.slice(0, newline);
      const separatorLength = this.buffer.startsWith("\r\n", newline) ? 2 : 1;
      this.buffer = this.buffer.slice(newline + separatorLength);
      if (line === "") {
        if (this.data.length > 0) events.push({ event: this.event, data: this.data.join("\n") });
        this.data = [];
        this.event = "message";
        continue;
      }
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "data") this.data.push(value);
      else if (field === "event") this.event = value;
    }
    if (this.buffer.length > sseLineCharsMax) this.buffer = this.buffer.slice(0, sseLineCharsMax);
    return events;
  }
}

/** Text of a console event: the `line` (or `message`, `text`) field of a JSON payload, else the data as is. */
export function consoleText(data: string): string {
  try {
    const parsed = JSON.parse(data) as unknown;
    if (parsed && typeof parsed === "object") {
      const record = parsed as Record<string, unknown>;
      for (const key of ["line", "message", "text"]) if (typeof record[key] === "string") return record[key] as string;
    }
  } catch {
    // Not JSON: the payload is the console line as plain text.
  }
  return data;
}

/** What one console event means to the client. */
export type ConsoleEventAction = { kind: "print"; text: string } | { kind: "refused"; message: string } | { kind: "ignore" };

/** Event types that carry a console line (`console` is the controller's; the others are accepted too). */
const lineEventTypes: ReadonlySet<string> = new Set(["console", "message", "line"]);

/**
 * Interprets one SSE event of the console stream: line events are printed (their text, or the raw
 * data with `--json`), `error` (a refused ticket, too many streams) ends the session, anything
 * else (`connected`) is ignored.
 */
export function interpretConsoleEvent(event: SseEvent, json: boolean): ConsoleEventAction {
  if (lineEventTypes.has(event.event)) return { kind: "print", text: json ? event.data : consoleText(event.data) };
  if (event.event === "error") return { kind: "refused", message: consoleText(event.data) };
  return { kind: "ignore" };
}

/** The error a refused stream becomes: an unaccepted ticket exits 2 like a 401, anything else 1. */
export function refusalError(message: string): CliError {
  const unauthorized = /^unauthori[sz]ed$/i.test(message.trim());
  return new CliError(`console stream refused: ${message}`, unauthorized ? ExitCode.unauthorized : ExitCode.failure);
}

/** What one chunk of stdin produced: complete lines to send, bytes to echo, and whether to detach. */
export interface InputStep {
  lines: string[];
  echo: number[];
  detach: boolean;
}

const lineFeed = 0x0a;
const carriageReturn = 0x0d;
const backspaceBytes: ReadonlySet<number> = new Set([0x7f, 0x08]);

/**
 * The console's line editor over stdin bytes. On a terminal (`raw`) typed bytes are echoed,
 * Backspace removes one whole UTF-8 character and Ctrl-C detaches as well as Ctrl-Q; on a pipe
 * bytes are only collected into lines. Bytes after the detach key are never looked at; a partial
 * line before it is dropped.
 */
export class ConsoleInput {
  private line: number[] = [];

  constructor(private readonly raw: boolean) {}

  push(chunk: Uint8Array): InputStep {
    const step: InputStep = { lines: [], echo: [], detach: false };
    for (const byte of chunk) {
      if (byte === detachByte || (this.raw && byte === interruptByte)) {
        step.detach = true;
        return step;
      }
      if (byte === lineFeed || byte === carriageReturn) {
        if (this.raw) step.echo.push(carriageReturn, lineFeed);
        this.submit(step);
      } else if (this.raw && backspaceBytes.has(byte)) {
        // Continuation bytes of a UTF-8 character are 10xxxxxx: drop them with their lead byte.
        while (this.line.length > 0 && (this.line[this.line.length - 1] & 0xc0) === 0x80) this.line.pop();
        if (this.line.length > 0) {
          this.line.pop();
          step.echo.push(0x08, 0x20, 0x08);
        }
      } else {
        this.line.push(byte);
        if (this.raw) step.echo.push(byte);
        if (this.line.length >= inputLineBytesMax) this.submit(step);
      }
    }
    return step;
  }

  private submit(step: InputStep): void {
    step.lines.push(Buffer.from(this.line).toString("utf8"));
    this.line = [];
  }
}

/** What ended a console session. */
export type ConsoleEnd = "detached" | "stream-closed";

type SessionEnd = { end: ConsoleEnd } | { refused: string };

/**
 * Runs a console session until Ctrl-Q or the end of the stream. A stream the controller refuses
 * (`event: error`) throws {@link refusalError}.
 */
export async function runConsole(client: HttpClient, out: Output, id: string, stdin: NodeJS.ReadStream = process.stdin): Promise<ConsoleEnd> {
  const base = `/api/v1/services/${segment(id)}`;
  const ticketResponse = await client.post<{ ticket?: string }>(`${base}/console/ticket`);
  const ticket = ticketResponse.data?.ticket;
  if (!ticket) throw new CliError("console ticket response carried no ticket");

  const abort = new AbortController();
  const url = client.url(`${base}/console`, { ticket });
  const headers = { ...client.headers(true), accept: "text/event-stream" };
  client.logRequest("GET", url, headers);
  let response: Response;
  try {
    response = await fetch(url, { headers, signal: abort.signal });
  } catch (error) {
    throw new CliError(`cannot open console stream: ${(error as Error).message}`, ExitCode.connection);
  }
  if (!response.ok || !response.body) throw errorFromResponse(response.status, response.statusText, await response.text());

  out.note(out.colors.dim(`attached to ${id} · type a command and press Enter · Ctrl-Q detaches`));

  let pending: Promise<void> = Promise.resolve();
  const send = (line: string) => {
    const command = line.trim();
    if (command === "") return;
    pending = pending.then(async () => {
      try {
        await client.post(`${base}/command`, { command });
      } catch (error) {
        out.note(`command failed: ${(error as Error).message}`);
      }
    });
  };

  let finish!: (end: SessionEnd) => void;
  const ended = new Promise<SessionEnd>((resolve) => (finish = resolve));
  const raw = Boolean(stdin.isTTY);
  const input = new ConsoleInput(raw);
  const onData = (chunk: Buffer) => {
    const step = input.push(chunk);
    if (step.echo.length > 0) process.stderr.write(Buffer.from(step.echo));
    for (const line of step.lines) send(line);
    if (step.detach) finish({ end: "detached" });
  };
  if (raw) stdin.setRawMode(true);
  stdin.on("data", onData);
  stdin.resume();

  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const parser = new SseParser();
  const pump = (async () => {
    try {
      while (true) {
        const { done, value } = await reader.read();
        if (done) break;
        for (const event of parser.push(decoder.decode(value, { stream: true }))) {
          const action = interpretConsoleEvent(event, out.json);
          if (action.kind === "print") out.line(action.text);
          else if (action.kind === "refused") return finish({ refused: action.message });
        }
      }
      finish({ end: "stream-closed" });
    } catch {
      // A read that fails is the stream ending (connection dropped, session aborted): reported as closed.
      finish({ end: "stream-closed" });
    }
  })();

  const result = await ended;
  stdin.off("data", onData);
  stdin.pause();
  if (raw) stdin.setRawMode(false);
  await pending;
  abort.abort();
  await pump;
  if ("refused" in result) throw refusalError(result.refused);
  out.note(out.colors.dim(result.end === "detached" ? "detached" : "console stream closed"));
  return result.end;
}

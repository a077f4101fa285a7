/**
 * `cloudctl instance console`: attaches to an instance's console. A single-use ticket is obtained
 * first, then the SSE stream is read and printed; typed lines are posted as commands. Ctrl-Q
 * (byte 0x11) detaches. On a terminal stdin is put in raw mode (Ctrl-C detaches too); on a pipe
 * stdin is read as lines and a 0x11 byte detaches after the lines before it were sent.
 */
import { CliError, ExitCode } from "./exit-codes.js";
import { errorFromResponse, segment, type HttpClient } from "./http-client.js";
import type { Output } from "./render.js";

/** The detach key: Ctrl-Q. */
export const detachByte = 0x11;
const interruptByte = 0x03;
/** Longest line (bytes) accepted from stdin before it is sent anyway; bounds the input buffer. */
export const inputLineMaxChars = 8 * 1024;
/** Longest SSE field line kept in memory; a longer line is cut (bounds the stream buffer). */
export const sseLineMaxChars = 1024 * 1024;

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
    if (this.buffer.length > sseLineMaxChars) this.buffer = this.buffer.slice(0, sseLineMaxChars);
    return events;
  }
}

/** Text of a console event: the `line` (or `message`) field of a JSON payload, else the data as is. */
export function consoleText(data: string): string {
  try {
    const parsed = JSON.parse(data) as unknown;
    if (parsed && typeof parsed === "object") {
      const record = parsed as Record<string, unknown>;
      for (const key of ["line", "message", "text"]) if (typeof record[key] === "string") return record[key] as string;
    }
  } catch {
    // plain text payload
  }
  return data;
}

/** What ended a console session. */
export type ConsoleEnd = "detached" | "stream-closed";

/** Runs a console session until Ctrl-Q or the end of the stream. */
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

  let finish!: (end: ConsoleEnd) => void;
  const ended = new Promise<ConsoleEnd>((resolve) => (finish = resolve));
  const raw = Boolean(stdin.isTTY);
  let line: number[] = [];
  const submit = () => {
    send(Buffer.from(line).toString("utf8"));
    line = [];
  };
  const onData = (chunk: Buffer) => {
    for (const byte of chunk) {
      if (byte === detachByte || (raw && byte === interruptByte)) {
        finish("detached");
        return;
      }
      if (byte === 0x0a || byte === 0x0d) {
        if (raw) process.stderr.write("\r\n");
        submit();
      } else if (raw && (byte === 0x7f || byte === 0x08)) {
        // Drop one whole UTF-8 character: continuation bytes are 10xxxxxx.
        while (line.length > 0 && (line[line.length - 1] & 0xc0) === 0x80) line.pop();
        if (line.length > 0) {
          line.pop();
          process.stderr.write("\b \b");
        }
      } else {
        line.push(byte);
        if (raw) process.stderr.write(Buffer.of(byte));
        if (line.length >= inputLineMaxChars) submit();
      }
    }
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
          if (event.event !== "message" && event.event !== "console" && event.event !== "line") continue;
          out.line(out.json ? event.data : consoleText(event.data));
        }
      }
      finish("stream-closed");
    } catch {
      finish("stream-closed");
    }
  })();

  const end = await ended;
  stdin.off("data", onData);
  stdin.pause();
  if (raw) stdin.setRawMode(false);
  await pending;
  abort.abort();
  await pump;
  out.note(out.colors.dim(end === "detached" ? "detached" : "console stream closed"));
  return end;
}

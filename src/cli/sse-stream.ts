/**
 * One Server-Sent Events stream of the controller, read frame by frame: the console, an instance's
 * log and the event stream all arrive this way (after a single-use ticket). A frame `event: error`
 * ends the stream with the controller's message: `Unauthorized` (a refused ticket) exits 2 like a
 * 401, anything else exits 1.
 */
import { SseParser, type SseEvent } from "./console-session.js";
import { CliError, ExitCode } from "./exit-codes.js";
import { errorFromResponse, type HttpClient } from "./http-client.js";

/** An open stream: `next()` resolves with the next frame, or null once the stream ended. */
export interface SseStream {
  next(): Promise<SseEvent | null>;
  close(): void;
}

/** Opens `path` with `query` (the ticket among it) and returns the stream once the response began. */
export async function openSse(client: HttpClient, path: string, query: Record<string, string | number | undefined>, what: string): Promise<SseStream> {
  const url = client.url(path, query);
  const headers = { ...client.headers(true), accept: "text/event-stream" };
  client.logRequest("GET", url, headers);
  const abort = new AbortController();
  let response: Response;
  try {
    response = await fetch(url, { headers, signal: abort.signal });
  } catch (error) {
    throw new CliError(`cannot open the ${what}: ${(error as Error).message}`, ExitCode.connection);
  }
  if (!response.ok || !response.body) throw errorFromResponse(response.status, response.statusText, await response.text());
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const parser = new SseParser();
  const pending: SseEvent[] = [];
  return {
    async next() {
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
      const frame = pending.shift()!;
      if (frame.event === "error") {
        let message = frame.data;
        try {
          message = (JSON.parse(frame.data) as { message?: string }).message ?? frame.data;
        } catch {
          // A plain-text refusal is the message itself.
        }
        throw new CliError(`${what} refused: ${message}`, message === "Unauthorized" ? ExitCode.unauthorized : ExitCode.failure);
      }
      return frame;
    },
    close: () => abort.abort(),
  };
}

/** A single-use console ticket for `instanceId` (`POST /api/v1/services/{id}/console/ticket`). */
export async function consoleTicket(client: HttpClient, instanceId: string): Promise<string> {
  const response = await client.post<{ ticket?: string }>(`/api/v1/services/${encodeURIComponent(instanceId)}/console/ticket`);
  if (!response.data?.ticket) throw new CliError("console ticket response carried no ticket");
  return response.data.ticket;
}

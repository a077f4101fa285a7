/**
 * Server-sent event responses as an {@link SseSink}. Served by Node (the controller), the stream is
 * written straight to the `ServerResponse`: the headers the middleware prepared (request id, CORS)
 * plus the SSE ones, then each write is one `write` on the response, with Node's own back-pressure
 * signal; the route answers hono with "already sent". Without a Node response (`app.request` in
 * tests) the same sink writes into a web `ReadableStream` response.
 */
import { ServerResponse } from "node:http";
import { RESPONSE_ALREADY_SENT } from "@hono/node-server/utils/response";
import type { SseSink } from "../shared/sse.js";
import type { AppContext } from "./types.js";

/** The headers of every event stream. */
export const SSE_RESPONSE_HEADERS: Readonly<Record<string, string>> = {
  "Content-Type": "text/event-stream",
  "Cache-Control": "no-cache",
  Connection: "keep-alive",
};

/** Bytes a web-stream response buffers before its writes say "full" (the Node socket has its own bound). */
const WEB_STREAM_BUFFER_BYTES = 64 * 1024;

/** Opens an event-stream response: the sink to write to and what the route returns. */
export function openSseResponse(c: AppContext): { sink: SseSink; response: Response } {
  const outgoing = (c.env as { outgoing?: unknown } | undefined)?.outgoing;
  return outgoing instanceof ServerResponse ? nodeSseResponse(c, outgoing) : webSseResponse(c);
}

function nodeSseResponse(c: AppContext, outgoing: ServerResponse): { sink: SseSink; response: Response } {
  const headers: Record<string, string | string[]> = {};
  c.newResponse(null, 200, { ...SSE_RESPONSE_HEADERS }).headers.forEach((value, name) => {
    const previous = headers[name];
    headers[name] = previous === undefined ? value : [...(Array.isArray(previous) ? previous : [previous]), value];
  });
  outgoing.writeHead(200, headers);
  outgoing.flushHeaders();
  // A write racing the client's disconnect must not take the process down.
  outgoing.on("error", () => undefined);
  const isClosed = () => outgoing.destroyed || outgoing.writableEnded;
  const sink: SseSink = {
    write: (chunk) => !isClosed() && outgoing.write(chunk),
    onDrain: (listener) => void outgoing.on("drain", listener),
    onClose: (listener) => {
      if (outgoing.destroyed || outgoing.writableFinished) queueMicrotask(listener);
      else outgoing.once("close", listener);
    },
    get closed() {
      return isClosed();
    },
    end: () => void (isClosed() ? undefined : outgoing.end()),
    cut: () => void outgoing.destroy(),
  };
  // A fresh "already sent" answer per request: the middleware after the route may set headers on it.
  return { sink, response: new Response(null, { headers: RESPONSE_ALREADY_SENT.headers }) };
}

function webSseResponse(c: AppContext): { sink: SseSink; response: Response } {
  const encoder = new TextEncoder();
  const drainListeners: (() => void)[] = [];
  const closeListeners: (() => void)[] = [];
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  let closed = false;
  let waitingForRoom = false;
  const close = () => {
    if (closed) return;
    closed = true;
    for (const listener of closeListeners.splice(0)) listener();
  };
  const body = new ReadableStream<Uint8Array>(
    {
      start: (c) => void (controller = c),
      pull: () => {
        if (!waitingForRoom) return;
        waitingForRoom = false;
        for (const listener of drainListeners) listener();
      },
      cancel: close,
    },
    { highWaterMark: WEB_STREAM_BUFFER_BYTES, size: (chunk) => chunk.byteLength },
  );
  const sink: SseSink = {
    write: (chunk) => {
      if (closed) return false;
      controller.enqueue(typeof chunk === "string" ? encoder.encode(chunk) : chunk);
      const room = (controller.desiredSize ?? 0) > 0;
      if (!room) waitingForRoom = true;
      return room;
    },
    onDrain: (listener) => void drainListeners.push(listener),
    onClose: (listener) => (closed ? queueMicrotask(listener) : void closeListeners.push(listener)),
    get closed() {
      return closed;
    },
    end: () => {
      if (closed) return;
      controller.close();
      close();
    },
    cut: () => {
      if (closed) return;
      controller.error(new Error("event stream cut"));
      close();
    },
  };
  return { sink, response: c.newResponse(body, 200, { ...SSE_RESPONSE_HEADERS }) };
}

/**
 * Request body handling around the routes: a size limit (413 PAYLOAD_TOO_LARGE) and the drain of
 * unread bodies. Both look at the method and headers first, so requests without a body never touch
 * `Request.body` (which makes the node adapter build a full `Request` for every GET).
 *
 * Most routes read small JSON bodies, which the default limit buffers and checks before the route
 * runs. A few routes (template uploads and imports) stream large bodies: they are listed with their
 * own limit, and their body is counted as the route reads it instead of being buffered.
 */
import type { Context, MiddlewareHandler } from "hono";
import { bodyLimit as honoBodyLimit } from "hono/body-limit";
import { ApiError } from "../../shared/errors.js";
import type { AppEnv } from "../types.js";

/** A route whose body is streamed and may exceed the default limit. */
export interface BodyLimitRoute {
  method: string;
  /** Path in hono syntax; `:name` segments match any one segment. */
  path: string;
  maxBytes: number;
}

/** True when the request declares a body (a length above zero, or chunked transfer). */
export function declaresBody(c: Context): boolean {
  const method = c.req.method;
  if (method === "GET" || method === "HEAD" || method === "OPTIONS") return false;
  const length = c.req.header("content-length");
  return (length !== undefined && length !== "0") || c.req.header("transfer-encoding") !== undefined;
}

function payloadTooLarge(maxBytes: number): ApiError {
  return new ApiError(413, "PAYLOAD_TOO_LARGE", `Request body exceeds ${maxBytes} bytes`);
}

function pathPattern(path: string): RegExp {
  const segments = path.split("/").map((segment) => (segment.startsWith(":") ? "[^/]+" : segment.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")));
  return new RegExp(`^${segments.join("/")}$`);
}

/**
 * Refuses bodies above `maxBytes` with 413 PAYLOAD_TOO_LARGE (declared or streamed). Requests to
 * one of `routes` get that route's limit instead, enforced as the body streams.
 */
export const bodyLimit = (opts: { maxBytes: number; routes?: readonly BodyLimitRoute[] }): MiddlewareHandler<AppEnv> => {
  const buffered = honoBodyLimit({
    maxSize: opts.maxBytes,
    onError: () => {
      throw payloadTooLarge(opts.maxBytes);
    },
  });
  const streamed = (opts.routes ?? []).map((route) => ({ method: route.method.toUpperCase(), pattern: pathPattern(route.path), maxBytes: route.maxBytes }));
  return async function bodyLimit(c, next) {
    if (!declaresBody(c)) return next();
    const route = streamed.find((r) => r.method === c.req.method && r.pattern.test(c.req.path));
    if (!route) return buffered(c, next);
    const declared = Number(c.req.header("content-length") ?? Number.NaN);
    if (declared > route.maxBytes) throw payloadTooLarge(route.maxBytes);
    const body = c.req.raw.body;
    if (body) c.req.raw = new Request(c.req.raw, { body: countedBody(body, route.maxBytes), duplex: "half" } as RequestInit);
    return next();
  };
};

/**
 * `body` passed through unchanged, one chunk per read, erroring with 413 PAYLOAD_TOO_LARGE as soon
 * as more than `maxBytes` went by; nothing is read ahead of the consumer.
 */
export function countedBody(body: ReadableStream<Uint8Array>, maxBytes: number): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  let readBytes = 0;
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        const { done, value } = await reader.read();
        if (done) {
          controller.close();
          return;
        }
        readBytes += value.byteLength;
        if (readBytes > maxBytes) {
          controller.error(payloadTooLarge(maxBytes));
          return;
        }
        controller.enqueue(value);
      },
      cancel(reason) {
        return reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
}

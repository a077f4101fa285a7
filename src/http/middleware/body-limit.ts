/**
 * Request body handling around the routes: a size limit (413 PAYLOAD_TOO_LARGE) and the drain of
 * unread bodies. Both look at the method and headers first, so requests without a body never touch
 * `Request.body` (which makes the node adapter build a full `Request` for every GET).
 */
import type { Context, MiddlewareHandler } from "hono";
import { bodyLimit as honoBodyLimit } from "hono/body-limit";
import { ApiError } from "../../shared/errors.js";
import type { AppEnv } from "../types.js";

/** True when the request declares a body (a length above zero, or chunked transfer). */
export function declaresBody(c: Context): boolean {
  const method = c.req.method;
  if (method === "GET" || method === "HEAD" || method === "OPTIONS") return false;
  const length = c.req.header("content-length");
  return (length !== undefined && length !== "0") || c.req.header("transfer-encoding") !== undefined;
}

/** Refuses bodies above `maxBytes` with 413 PAYLOAD_TOO_LARGE (declared or streamed). */
export const bodyLimit = (opts: { maxBytes: number }): MiddlewareHandler<AppEnv> => {
  const limit = honoBodyLimit({
    maxSize: opts.maxBytes,
    onError: () => {
      throw new ApiError(413, "PAYLOAD_TOO_LARGE", `Request body exceeds ${opts.maxBytes} bytes`);
    },
  });
  return async function bodyLimit(c, next) {
    if (!declaresBody(c)) return next();
    return limit(c, next);
  };
};

/**
 * Reads and discards whatever part of a request body the route did not read. A request refused early
 * (401, 403, 429, 404) otherwise leaves its body in the socket, and the node adapter then drops the
 * keep-alive connection under the client's next request. Bodies declared larger than the limit are
 * not read: the response asks the client to close the connection instead.
 */
import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "../types.js";
import { declaresBody } from "./body-limit.js";

export const drainBody = (opts: { maxBytes: number }): MiddlewareHandler<AppEnv> =>
  async function drainBody(c, next) {
    await next();
    if (!declaresBody(c)) return;
    const raw = c.req.raw;
    if (raw.body === null || raw.bodyUsed) return;
    const declared = Number(c.req.header("content-length") ?? Number.NaN);
    if (c.res.status === 413 || declared > opts.maxBytes) {
      c.header("Connection", "close");
      return;
    }
    const reader = raw.body.getReader();
    let readBytes = 0;
    try {
      while (readBytes <= opts.maxBytes) {
        const { done, value } = await reader.read();
        if (done) return;
        readBytes += value.byteLength;
      }
      c.header("Connection", "close");
      await reader.cancel();
    } catch {
      // The client went away or the stream errored: nothing left to drain.
    }
  };

/** The central `onError` and `notFound` handlers: every failure leaves as the error envelope. */
import type { ErrorHandler, NotFoundHandler } from "hono";
import type { Logger } from "../../logs/types.js";
import { errorEnvelope, renderThrown } from "../envelope.js";
import type { AppEnv } from "../types.js";
import { ApiError } from "../../shared/errors.js";

export const handleError = (opts: { logger: Logger }): ErrorHandler<AppEnv> =>
  function handleError(err, c) {
    const rendered = renderThrown(err);
    if (rendered.internal) {
      opts.logger.error(`Unhandled error on ${c.req.method} ${truncate(c.req.path)}`, err);
    } else if (rendered.status >= 500) {
      opts.logger.warn(`${c.req.method} ${truncate(c.req.path)} failed: ${rendered.code} ${rendered.message}`);
    }
    // A rate limit, or a store outage (StoreUnavailableError, 503 STORE_UNAVAILABLE): the client is told when to try again.
    const retryAfterSeconds = err instanceof ApiError ? (err as ApiError & { retryAfterSeconds?: unknown }).retryAfterSeconds : undefined;
    if (typeof retryAfterSeconds === "number") c.header("Retry-After", String(retryAfterSeconds));
    return c.json(errorEnvelope(rendered.status, rendered.code, rendered.message), rendered.status as 500);
  };

/** Paths longer than this are cut in messages (a 1 MB path must not come back in the body). */
const PATH_IN_MESSAGE_LENGTH_MAX = 200;

function truncate(path: string): string {
  return path.length > PATH_IN_MESSAGE_LENGTH_MAX ? `${path.slice(0, PATH_IN_MESSAGE_LENGTH_MAX)}...` : path;
}

export const handleNotFound = (): NotFoundHandler<AppEnv> =>
  function handleNotFound(c) {
    return c.json(errorEnvelope(404, "NOT_FOUND", `No route for ${c.req.method} ${truncate(c.req.path)}`), 404);
  };

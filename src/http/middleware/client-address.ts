/** Records the socket address of the caller as `clientIp` for the guards, rate limits and audit. */
import type { MiddlewareHandler } from "hono";
import { socketAddressOf } from "../client-ip.js";
import type { AppEnv } from "../types.js";

export const clientAddress = (): MiddlewareHandler<AppEnv> =>
  async function clientAddress(c, next) {
    c.set("clientIp", socketAddressOf(c));
    c.set("principal", null);
    await next();
  };

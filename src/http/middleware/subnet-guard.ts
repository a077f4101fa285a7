/** Refuses callers outside `http.allowedCidrs` with 403 FORBIDDEN; an empty list allows everyone. */
import type { MiddlewareHandler } from "hono";
import { CidrSet } from "../cidr.js";
import { forbidden } from "../../shared/errors.js";
import type { AppEnv } from "../types.js";

export const subnetGuard = (opts: { allowedCidrs: readonly string[] }): MiddlewareHandler<AppEnv> => {
  const allowed = new CidrSet(opts.allowedCidrs);
  return async function subnetGuard(c, next) {
    if (allowed.size > 0 && !allowed.contains(c.get("clientIp"))) {
      throw forbidden("Client address is not allowed");
    }
    await next();
  };
};

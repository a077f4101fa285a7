/**
 * JWT authentication: a `Bearer` token is verified and the caller's principal set. A missing header
 * leaves the principal null; an unusable token also leaves it null and records why, so that routes
 * needing credentials answer 401 with that reason while public routes (login) still work.
 */
import type { MiddlewareHandler } from "hono";
import { ApiError } from "../../shared/errors.js";
import type { Principal } from "../../auth/principal.js";
import type { AppEnv } from "../types.js";

/** Resolves a bearer token to a principal; throws a 401 {@link ApiError} when it is not valid. */
export interface Authenticator {
  authenticate(token: string): Promise<Principal>;
}

const BEARER_PATTERN = /^Bearer\s+(\S+)\s*$/i;

export const authenticate = (opts: { auth: Authenticator }): MiddlewareHandler<AppEnv> =>
  async function authenticate(c, next) {
    const header = c.req.header("authorization");
    if (header !== undefined && header.trim() !== "") {
      const match = BEARER_PATTERN.exec(header);
      if (!match) {
        c.set("authFailure", "Authorization header must be 'Bearer <token>'");
      } else {
        try {
          c.set("principal", await opts.auth.authenticate(match[1]));
        } catch (err) {
          if (!(err instanceof ApiError) || err.status !== 401) throw err;
          c.set("authFailure", err.message);
        }
      }
    }
    await next();
  };

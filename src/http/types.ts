/** Request-scoped context shared by the middleware chain and the routes. */
import type { Context } from "hono";
import type { Principal } from "../auth/principal.js";

export interface AppVariables {
  principal: Principal | null;
  requestId: string;
  correlationId: string;
  clientIp: string;
  /** Why a presented credential was refused; routes that need credentials answer 401 with it. */
  authFailure?: string;
  /** The inbound W3C `traceparent` when well-formed (plugin routes), continued by what the request causes. */
  traceparent?: string;
}

export type AppEnv = { Variables: AppVariables };
export type AppContext = Context<AppEnv>;

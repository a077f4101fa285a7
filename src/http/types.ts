/** Request-scoped context shared by the middleware chain and the routes. */
import type { Context } from "hono";

/** Who is calling: a signed-in user (JWT) or an instance (workload token). */
export interface Principal {
  readonly kind: "user" | "workload";
  /** Username for users; `instance:<id>` for workloads. */
  readonly username: string;
  readonly roles: readonly string[];
  readonly permissions: ReadonlySet<string>;
  /** Set for workload principals. */
  readonly instanceId?: string;
}

export interface AppVariables {
  principal: Principal | null;
  requestId: string;
  correlationId: string;
  clientIp: string;
  /** Why a presented credential was refused; routes that need credentials answer 401 with it. */
  authFailure?: string;
}

export type AppEnv = { Variables: AppVariables };
export type AppContext = Context<AppEnv>;

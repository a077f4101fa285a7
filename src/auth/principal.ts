/** The principal: the identity authentication produces, permission checks read and HTTP carries per request. */

/** Who is calling: a signed-in user (JWT) or an instance (workload token). */
export interface Principal {
  readonly kind: "user" | "workload";
  /** Username for users; `instance:<id>` for workloads. */
  readonly username: string;
  readonly roles: readonly string[];
  readonly permissions: ReadonlySet<string>;
  /** Set for workload principals. */
  readonly instanceId?: string;
  /** Workload principals: the verified token (its id, its start, its lifetime). */
  readonly workload?: {
    readonly instanceId: string;
    readonly group: string;
    readonly node: string;
    readonly tokenId: string;
    readonly startId: string;
    readonly familyId: string;
    readonly generation: number;
    readonly issuedAtMs: number;
    readonly expiresAtMs: number;
  };
}

/** Audit contract (spec document 2, "Audit record"). The HTTP layer records every successful mutation. */

export interface AuditEntryInput {
  /** Dotted verb, e.g. `group.create`. */
  action: string;
  resourceType: string;
  resourceId: string;
  /** Serialized as JSON text; `{}` when absent. */
  details?: Record<string, unknown>;
  /** Snapshots for diff-audited mutations: `before` absent on create, `after` absent on delete. */
  before?: unknown;
  after?: unknown;
}

export interface AuditActor {
  /** Acting principal; `system` when none. */
  username: string;
  ipAddress: string;
}

export interface AuditRecorder {
  record(entry: AuditEntryInput, actor: AuditActor): Promise<void>;
}

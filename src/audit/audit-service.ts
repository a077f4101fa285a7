/**
 * The audit log (spec document 2, "Audit record"): one document per successful mutation in the
 * collection `audit_log`, with a secondary index on `username` only and the fixed 90-day expiry
 * index `audit_ttl` on `createdAt`. Ids are time-ordered ObjectId-shaped strings, so newest-first
 * reads and keyset paging work on `_id` alone.
 */
import { createHash } from "node:crypto";
import type { Clock } from "../shared/clock.js";
import { badRequest } from "../shared/errors.js";
import { isObjectId, ObjectIdGenerator } from "../shared/object-id.js";
import type { Collection, Doc, DocumentStore, Filter } from "../store/ports.js";
import type { AuditActor, AuditEntryInput, AuditRecorder } from "./types.js";

export const AUDIT_COLLECTION = "audit_log";
/** Fixed retention: `scheduler.auditRetentionDays` above 90 does not extend it (spec document 2). */
export const AUDIT_RETENTION_SECONDS = 90 * 24 * 60 * 60;
export const AUDIT_PAGE_SIZE_DEFAULT = 100;
export const AUDIT_PAGE_SIZE_MAX = 500;
/** Acting username recorded when a mutation has no principal. */
export const SYSTEM_USERNAME = "system";

/** The stored audit document. `before`/`after` are absent unless given; null when unserializable. */
export interface AuditDoc extends Doc {
  username: string;
  action: string;
  resourceType: string;
  resourceId: string;
  details: string;
  before?: string | null;
  after?: string | null;
  ipAddress: string;
  /** ISO 8601; drives the `audit_ttl` expiry. */
  createdAt: string;
}

/** The REST form: the stored fields plus a numeric `id` hashed from `_id` (not a cursor). */
export interface AuditRecordView {
  id: number;
  _id: string;
  username: string;
  action: string;
  resourceType: string;
  resourceId: string;
  details: string;
  before?: string | null;
  after?: string | null;
  ipAddress: string;
  createdAt: string;
}

/** Equality filters a reader may apply. */
export interface AuditFilter {
  username?: string;
  action?: string;
  resourceType?: string;
}

export interface AuditPage {
  data: AuditRecordView[];
  page: number;
  pageSize: number;
  total: number;
}

export interface AuditKeysetPage {
  data: AuditRecordView[];
  pageSize: number;
  nextCursor: string | null;
  total: number;
}

/** Clamps a requested page size to 1..500; absent or non-numeric gives the default 100. */
export function clampAuditPageSize(requested: number | undefined): number {
  if (requested === undefined || !Number.isFinite(requested)) return AUDIT_PAGE_SIZE_DEFAULT;
  return Math.min(AUDIT_PAGE_SIZE_MAX, Math.max(1, Math.trunc(requested)));
}

/** The numeric REST id: the first 48 bits of sha256(_id), a safe integer that is stable but not ordered. */
export function auditNumericId(objectId: string): number {
  return createHash("sha256").update(objectId).digest().readUIntBE(0, 6);
}

/** JSON text of a snapshot, or null when it cannot be serialized (cycles, BigInt, throwing toJSON). */
function serializeSnapshot(value: unknown): string | null {
  try {
    const text = JSON.stringify(value);
    return text === undefined ? null : text;
  } catch {
    // The audit record is still written, with no snapshot rather than a broken one.
    return null;
  }
}

function toView(doc: AuditDoc): AuditRecordView {
  const view: AuditRecordView = {
    id: auditNumericId(doc._id),
    _id: doc._id,
    username: doc.username,
    action: doc.action,
    resourceType: doc.resourceType,
    resourceId: doc.resourceId,
    details: doc.details,
    ipAddress: doc.ipAddress,
    createdAt: doc.createdAt,
  };
  if ("before" in doc) view.before = doc.before ?? null;
  if ("after" in doc) view.after = doc.after ?? null;
  return view;
}

export interface AuditServiceDeps {
  documents: DocumentStore;
  clock: Clock;
}

/** Writes and reads the audit log; the only code that touches `audit_log`. */
export class AuditService implements AuditRecorder {
  private readonly collection: Collection<AuditDoc>;
  private readonly ids: ObjectIdGenerator;

  constructor(private readonly deps: AuditServiceDeps) {
    this.collection = deps.documents.collection<AuditDoc>(AUDIT_COLLECTION, {
      indexes: [{ name: "audit_username", field: "username" }],
      ttl: { name: "audit_ttl", field: "createdAt", seconds: AUDIT_RETENTION_SECONDS },
    });
    this.ids = new ObjectIdGenerator(deps.clock);
  }

  /**
   * Deletes records older than `retentionDays` (scheduler.auditRetentionDays) and returns how many;
   * the expiry index keeps at most 90 days whatever the setting.
   */
  async prune(retentionDays: number): Promise<number> {
    const days = Math.min(Math.max(1, Math.floor(retentionDays)), AUDIT_RETENTION_SECONDS / 86_400);
    const cutoff = new Date(this.deps.clock.nowMs() - days * 86_400_000).toISOString();
    return this.collection.deleteMany({ createdAt: { $lt: cutoff } });
  }

  /** Appends one record; durable when the promise resolves. */
  async record(entry: AuditEntryInput, actor: AuditActor): Promise<void> {
    const doc: AuditDoc = {
      _id: this.ids.next(),
      username: actor.username || SYSTEM_USERNAME,
      action: entry.action,
      resourceType: entry.resourceType,
      resourceId: entry.resourceId,
      details: serializeSnapshot(entry.details ?? {}) ?? "{}",
      ipAddress: actor.ipAddress,
      createdAt: new Date(this.deps.clock.nowMs()).toISOString(),
    };
    if (entry.before !== undefined) doc.before = serializeSnapshot(entry.before);
    if (entry.after !== undefined) doc.after = serializeSnapshot(entry.after);
    await this.collection.insert(doc);
  }

  /** Page mode: newest first, `skip` records skipped (page 1 is the newest). */
  async page(query: { skip: number; pageSize: number; filter?: AuditFilter }): Promise<AuditPage> {
    const pageSize = clampAuditPageSize(query.pageSize);
    const skip = Math.max(0, Math.trunc(query.skip));
    const filter = toFilter(query.filter);
    const [docs, total] = await Promise.all([
      this.collection.find(filter, { sort: { field: "_id", direction: -1 }, skip, limit: pageSize }),
      this.collection.count(filter),
    ]);
    return { data: docs.map(toView), page: Math.floor(skip / pageSize) + 1, pageSize, total };
  }

  /**
   * Keyset mode: the `pageSize` newest records older than `cursor` (a blank cursor reads the newest
   * page). `nextCursor` is the `_id` of the oldest record returned, null when nothing older exists.
   * @throws ApiError 400 BAD_CURSOR when the cursor is not an ObjectId.
   */
  async keyset(query: { cursor: string; pageSize: number; filter?: AuditFilter }): Promise<AuditKeysetPage> {
    const pageSize = clampAuditPageSize(query.pageSize);
    const cursor = query.cursor.trim();
    if (cursor !== "" && !isObjectId(cursor)) throw badRequest("cursor is not a valid ObjectId", "BAD_CURSOR");
    const base = toFilter(query.filter);
    const filter: Filter = cursor === "" ? base : { ...base, _id: { $lt: cursor.toLowerCase() } };
    const [docs, total] = await Promise.all([
      this.collection.find(filter, { sort: { field: "_id", direction: -1 }, limit: pageSize + 1 }),
      this.collection.count(base),
    ]);
    const hasOlder = docs.length > pageSize;
    const data = docs.slice(0, pageSize).map(toView);
    return { data, pageSize, nextCursor: hasOlder ? data[data.length - 1]._id : null, total };
  }
}

function toFilter(filter: AuditFilter | undefined): Filter {
  const out: Filter = {};
  if (filter?.username) out.username = filter.username;
  if (filter?.action) out.action = filter.action;
  if (filter?.resourceType) out.resourceType = filter.resourceType;
  return out;
}

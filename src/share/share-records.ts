/**
 * The durable record of every successful share, in the document collection `shares`: what was
 * shared, where, by whom, until when, and the paste's delete token, which revokes it. The delete
 * token is a secret: it stays in the stored document and never leaves through {@link ShareRecord}
 * (the form every read answers) nor in a log line.
 *
 * A record lives until its paste expires (`expiresAt`; never, for a share that does not expire);
 * a revoked one until {@link REVOKED_SHARE_RETENTION_MS} after its revocation, or its expiry if
 * that comes first. The collection's TTL (`shares_ttl` on `retainUntil`) removes a record once
 * that time has passed; reads hide it from that time on, whether or not the sweep has run.
 */
import type { Clock } from "../shared/clock.js";
import { ObjectIdGenerator } from "../shared/object-id.js";
import type { Collection, Doc, DocumentStore } from "../store/ports.js";

export const SHARES_COLLECTION = "shares";
/** How long a revoked record stays visible (who revoked what, and when). */
export const REVOKED_SHARE_RETENTION_MS = 30 * 86_400_000;
/** Between a record's end and the sweep that removes it; reads hide it meanwhile. */
const SHARE_PRUNE_GRACE_SECONDS = 60;
export const SHARE_LIST_LIMIT_DEFAULT = 100;
export const SHARE_LIST_LIMIT_MAX = 500;

/** What a new record is made of (the rest is filled in when it is stored). */
export interface NewShare {
  kind: string;
  /** The paste's id at the service. */
  pasteId: string;
  url: string;
  /** The service the paste was uploaded to (a revoke asks that one, whatever `share.serviceUrl` says now). */
  serviceUrl: string;
  /** Empty when the service gave none. Secret. */
  deleteToken: string;
  expiry: string;
  expiresAt: string | null;
  public: boolean;
  burnAfterRead: boolean;
  sizeChars: number;
  createdBy: string;
}

/** The stored document. */
export interface ShareDoc extends Doc, NewShare {
  createdAt: string;
  revokedAt: string | null;
  revokedBy: string | null;
  /** When the record ends (null: never); the TTL field. */
  retainUntil: string | null;
}

/** A record as the routes answer it: no delete token, no service address. */
export interface ShareRecord {
  id: string;
  kind: string;
  pasteId: string;
  url: string;
  expiry: string;
  expiresAt: string | null;
  public: boolean;
  burnAfterRead: boolean;
  sizeChars: number;
  createdBy: string;
  createdAt: string;
  revokedAt: string | null;
  revokedBy: string | null;
  /** True while the share is not revoked and the service gave a delete token. */
  revocable: boolean;
}

/** The public form of a stored record. */
export function shareRecordView(doc: ShareDoc): ShareRecord {
  return {
    id: doc._id,
    kind: doc.kind,
    pasteId: doc.pasteId,
    url: doc.url,
    expiry: doc.expiry,
    expiresAt: doc.expiresAt,
    public: doc.public,
    burnAfterRead: doc.burnAfterRead,
    sizeChars: doc.sizeChars,
    createdBy: doc.createdBy,
    createdAt: doc.createdAt,
    revokedAt: doc.revokedAt,
    revokedBy: doc.revokedBy,
    revocable: doc.revokedAt === null && doc.deleteToken !== "",
  };
}

/** The `shares` collection. */
export class ShareRecords {
  private readonly collection: Collection<ShareDoc>;
  private readonly ids: ObjectIdGenerator;

  constructor(
    documents: DocumentStore,
    private readonly clock: Clock,
  ) {
    this.collection = documents.collection<ShareDoc>(SHARES_COLLECTION, {
      indexes: [{ name: "shares_created_at", field: "createdAt" }],
      ttl: { name: "shares_ttl", field: "retainUntil", seconds: SHARE_PRUNE_GRACE_SECONDS },
    });
    this.ids = new ObjectIdGenerator(clock);
  }

  /** Stores a new record; durable when it resolves. */
  async create(share: NewShare): Promise<ShareDoc> {
    const doc: ShareDoc = {
      ...share,
      _id: this.ids.next(),
      createdAt: new Date(this.clock.nowMs()).toISOString(),
      revokedAt: null,
      revokedBy: null,
      retainUntil: share.expiresAt,
    };
    await this.collection.insert(doc);
    return doc;
  }

  /** The stored record, unless unknown or ended. */
  async get(id: string): Promise<ShareDoc | null> {
    const doc = await this.collection.get(id);
    return doc && this.isLive(doc, this.clock.nowMs()) ? doc : null;
  }

  /** The newest `limit` records that have not ended, newest first. */
  async list(limit: number): Promise<ShareDoc[]> {
    const nowMs = this.clock.nowMs();
    const out: ShareDoc[] = [];
    // Ended records are few (the sweep removes them within a minute), so a page or two suffices.
    for (let skip = 0; out.length < limit; skip += limit) {
      const page = await this.collection.find({}, { sort: { field: "createdAt", direction: -1 }, skip, limit });
      for (const doc of page) if (out.length < limit && this.isLive(doc, nowMs)) out.push(doc);
      if (page.length < limit) break;
    }
    return out;
  }

  /** Marks a record revoked by `username` now; durable when it resolves. */
  async markRevoked(doc: ShareDoc, username: string): Promise<ShareDoc> {
    const nowMs = this.clock.nowMs();
    const keptUntilMs = nowMs + REVOKED_SHARE_RETENTION_MS;
    const expiresMs = doc.expiresAt === null ? Number.POSITIVE_INFINITY : Date.parse(doc.expiresAt);
    const revoked: ShareDoc = {
      ...doc,
      revokedAt: new Date(nowMs).toISOString(),
      revokedBy: username,
      retainUntil: new Date(Math.min(keptUntilMs, expiresMs)).toISOString(),
    };
    await this.collection.put(revoked);
    return revoked;
  }

  private isLive(doc: ShareDoc, nowMs: number): boolean {
    return doc.retainUntil === null || Date.parse(doc.retainUntil) > nowMs;
  }
}

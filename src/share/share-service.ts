/**
 * Sharing (spec document 2, "Diagnostics and sharing"): uploads already-redacted support text
 * (logs, diagnostics, a crash report) to the configured PrivateBin service and answers the link.
 *
 * Options: `expiry` 1h, 1d (default), 30d or never (PrivateBin's 1hour, 1day, 1month, never);
 * `public`, which overrides `share.defaultPrivate`; `burnAfterRead`. A private share is a
 * password-protected paste: the answer carries a generated `password` that the reader needs
 * besides the link. A public one opens with the link alone.
 *
 * `share.enabled` false answers 409 SHARE_DISABLED before anything is read; a failure of the paste
 * service answers 502 PASTE_UPSTREAM_ERROR. Every attempt counts in the `cloud_share_*` metrics.
 *
 * Every successful share is recorded (`share-records.ts`) before it is answered, with the paste's
 * delete token, so that it can be listed and revoked later: a revoke asks the service that holds
 * the paste to delete it and then marks the record revoked. A revoke that fails upstream (502
 * PASTE_UPSTREAM_ERROR) leaves the record as it was, so it can be retried; a share whose service
 * gave no delete token cannot be revoked (409 SHARE_NOT_REVOCABLE), nor can one already revoked
 * (409 SHARE_ALREADY_REVOKED). Revoking works whatever `share.enabled` says: switching uploads off
 * must not strand what was already shared.
 */
import { randomBytes } from "node:crypto";
import type { Logger } from "../logs/types.js";
import type { ShareMetrics } from "../metrics/share-metrics.js";
import type { Clock } from "../shared/clock.js";
import type { DocumentStore } from "../store/ports.js";
import { ApiError, conflict, notFound } from "../shared/errors.js";
import {
  createPrivateBinPaste,
  deletePrivateBinPaste,
  PasteUpstreamError,
  type PasteCreated,
  type PasteDeletion,
  type PasteRequest,
  type PrivateBinExpiry,
} from "./privatebin.js";
import { ShareRecords, shareRecordView, SHARE_LIST_LIMIT_DEFAULT, type ShareDoc, type ShareRecord } from "./share-records.js";

export const SHARE_EXPIRIES = ["1h", "1d", "30d", "never"] as const;
export type ShareExpiry = (typeof SHARE_EXPIRIES)[number];
export const SHARE_EXPIRY_DEFAULT: ShareExpiry = "1d";
/** What is shared. */
export type ShareKind = "logs" | "diagnostics" | "crash";

/** Upload text above this many characters keeps its end (the newest lines) and says what was cut. */
export const SHARE_TEXT_CHARS_MAX = 4 * 1024 * 1024;
/** How long one upload may take. */
export const SHARE_UPLOAD_TIMEOUT_MS = 15_000;
/** How long one delete at the paste service may take. */
export const SHARE_DELETE_TIMEOUT_MS = 15_000;
/** Characters of a generated paste password. */
const PASSWORD_BYTES = 12;

const EXPIRY: Record<ShareExpiry, { privatebin: PrivateBinExpiry; ms: number | null }> = {
  "1h": { privatebin: "1hour", ms: 3_600_000 },
  "1d": { privatebin: "1day", ms: 86_400_000 },
  "30d": { privatebin: "1month", ms: 30 * 86_400_000 },
  never: { privatebin: "never", ms: null },
};

/** The options of a share request (every field optional). */
export interface ShareOptions {
  expiry?: ShareExpiry;
  public?: boolean;
  burnAfterRead?: boolean;
}

/** The answer of a share. */
export interface ShareResult {
  /** The record's id: list it, or revoke the share, under `/api/v1/shares/{id}`. */
  id: string;
  url: string;
  kind: ShareKind;
  expiry: ShareExpiry;
  /** When the paste expires; null for never. */
  expiresAt: string | null;
  public: boolean;
  burnAfterRead: boolean;
  /** Needed besides the link to open a private share; absent for a public one. */
  password?: string;
  /** Opening it deletes the paste (empty when the service gave no delete token). */
  deleteUrl: string;
  /** Characters uploaded (after redaction and any cut). */
  sizeChars: number;
}

/** The uploader; PrivateBin by default, replaced in tests of the service alone. */
export type PasteUploader = (serviceUrl: string, request: PasteRequest, timeoutMs: number) => Promise<PasteCreated>;
/** The deleter; PrivateBin by default. */
export type PasteRemover = (serviceUrl: string, deletion: PasteDeletion, timeoutMs: number) => Promise<void>;

export interface ShareServiceOptions {
  /** controller.yml `share`. */
  config: { enabled: boolean; defaultPrivate: boolean; serviceUrl: string };
  metrics: ShareMetrics;
  clock: Clock;
  logger: Logger;
  /** Where the share records are kept. */
  documents: DocumentStore;
  upload?: PasteUploader;
  remove?: PasteRemover;
  /** Serialises revokes of one share across controllers (a cluster-wide lock); within this controller alone when absent. */
  revokeLock?: { run<T>(shareId: string, fn: () => Promise<T>): Promise<T> };
}

export const shareDisabled = () => conflict("Sharing is disabled (share.enabled is false)", "SHARE_DISABLED");

/** Uploads redacted support text, and lists and revokes what was shared. */
export class ShareService {
  private readonly upload: PasteUploader;
  private readonly remove: PasteRemover;
  private readonly records: ShareRecords;
  /** Revokes in flight on this controller, by record id: a second one waits for the first. */
  private readonly revoking = new Map<string, Promise<unknown>>();

  constructor(private readonly options: ShareServiceOptions) {
    this.upload = options.upload ?? createPrivateBinPaste;
    this.remove = options.remove ?? deletePrivateBinPaste;
    this.records = new ShareRecords(options.documents, options.clock);
  }

  get enabled(): boolean {
    return this.options.config.enabled;
  }

  /** Throws 409 SHARE_DISABLED unless sharing is on; routes call it before gathering anything. */
  requireEnabled(): void {
    if (!this.enabled) throw shareDisabled();
  }

  /** Uploads `text` (already redacted) for `createdBy`, records the share and answers the link. */
  async share(kind: ShareKind, text: string, options: ShareOptions, createdBy: string): Promise<ShareResult> {
    this.requireEnabled();
    const expiry = options.expiry ?? SHARE_EXPIRY_DEFAULT;
    const isPublic = options.public ?? !this.options.config.defaultPrivate;
    const burnAfterRead = options.burnAfterRead ?? false;
    const body = text.length > SHARE_TEXT_CHARS_MAX ? `[${text.length - SHARE_TEXT_CHARS_MAX} characters cut]\n${text.slice(-SHARE_TEXT_CHARS_MAX)}` : text;
    const password = isPublic ? undefined : randomBytes(PASSWORD_BYTES).toString("base64url");
    const { metrics, clock, logger } = this.options;
    metrics.uploadBytes(Buffer.byteLength(body, "utf8"));
    let created: PasteCreated;
    try {
      created = await this.upload(
        this.options.config.serviceUrl,
        { text: body, expire: EXPIRY[expiry].privatebin, burnAfterReading: burnAfterRead, password },
        SHARE_UPLOAD_TIMEOUT_MS,
      );
    } catch (err) {
      metrics.attempt(kind, "error");
      const status = err instanceof PasteUpstreamError ? err.status : "network";
      metrics.upstreamError(status);
      logger.warn(`Sharing ${kind} failed: ${(err as Error).message}`);
      throw new ApiError(502, "PASTE_UPSTREAM_ERROR", (err as Error).message);
    }
    metrics.attempt(kind, "success");
    const ms = EXPIRY[expiry].ms;
    const expiresAt = ms === null ? null : new Date(clock.nowMs() + ms).toISOString();
    const serviceUrl = this.options.config.serviceUrl;
    let record: ShareDoc;
    try {
      record = await this.records.create({
        kind,
        pasteId: created.id,
        url: created.url,
        serviceUrl,
        deleteToken: created.deleteToken,
        expiry,
        expiresAt,
        public: isPublic,
        burnAfterRead,
        sizeChars: body.length,
        createdBy,
      });
    } catch (err) {
      // Unrecorded, the paste could never be revoked from here: take it back rather than leave it.
      logger.error(`Recording the ${kind} share (paste ${created.id}) failed; deleting the paste: ${(err as Error).message}`);
      if (created.deleteToken !== "") {
        await this.remove(serviceUrl, { pasteId: created.id, deleteToken: created.deleteToken }, SHARE_DELETE_TIMEOUT_MS).catch((removeErr: Error) =>
          logger.warn(`Deleting the unrecorded paste ${created.id} failed: ${removeErr.message}`),
        );
      }
      throw err;
    }
    logger.info(
      `Shared ${kind} as ${record._id} by ${createdBy} (${body.length} characters, expiry ${expiry}, ${isPublic ? "public" : "private"}${burnAfterRead ? ", burn after read" : ""})`,
    );
    return {
      id: record._id,
      url: created.url,
      kind,
      expiry,
      expiresAt,
      public: isPublic,
      burnAfterRead,
      ...(password === undefined ? {} : { password }),
      deleteUrl: created.deleteUrl,
      sizeChars: body.length,
    };
  }

  /** The recorded shares that have not ended, newest first (without delete tokens). */
  async list(limit = SHARE_LIST_LIMIT_DEFAULT): Promise<ShareRecord[]> {
    return (await this.records.list(limit)).map(shareRecordView);
  }

  /** One recorded share; 404 NOT_FOUND when unknown or ended. */
  async get(id: string): Promise<ShareRecord> {
    return shareRecordView(await this.requireRecord(id));
  }

  /**
   * Revokes a share for `username`: the paste service deletes the paste, then the record is marked
   * revoked. Answers the record before and after. 404 NOT_FOUND, 409 SHARE_ALREADY_REVOKED, 409
   * SHARE_NOT_REVOCABLE (no delete token), 502 PASTE_UPSTREAM_ERROR (record unchanged).
   */
  async revoke(id: string, username: string): Promise<{ before: ShareRecord; after: ShareRecord }> {
    for (let inFlight = this.revoking.get(id); inFlight; inFlight = this.revoking.get(id)) await inFlight.catch(() => undefined);
    const { revokeLock } = this.options;
    const attempt = revokeLock ? revokeLock.run(id, () => this.revokeNow(id, username)) : this.revokeNow(id, username);
    this.revoking.set(id, attempt);
    try {
      return await attempt;
    } finally {
      this.revoking.delete(id);
    }
  }

  private async revokeNow(id: string, username: string): Promise<{ before: ShareRecord; after: ShareRecord }> {
    const { metrics, logger } = this.options;
    const record = await this.requireRecord(id);
    if (record.revokedAt !== null) throw conflict(`Share ${id} was already revoked at ${record.revokedAt} by ${record.revokedBy}`, "SHARE_ALREADY_REVOKED");
    if (record.deleteToken === "") {
      metrics.revocation("missing-token");
      throw conflict(`Share ${id} cannot be revoked: the paste service gave no delete token`, "SHARE_NOT_REVOCABLE");
    }
    try {
      await this.remove(record.serviceUrl, { pasteId: record.pasteId, deleteToken: record.deleteToken }, SHARE_DELETE_TIMEOUT_MS);
    } catch (err) {
      metrics.revocation("error");
      metrics.upstreamError(err instanceof PasteUpstreamError ? err.status : "network");
      logger.warn(`Revoking share ${id} (paste ${record.pasteId}) failed: ${(err as Error).message}`);
      throw new ApiError(502, "PASTE_UPSTREAM_ERROR", (err as Error).message);
    }
    let revoked: ShareDoc;
    try {
      revoked = await this.records.markRevoked(record, username);
    } catch (err) {
      logger.error(`Share ${id}: the paste ${record.pasteId} was deleted but the record could not be marked revoked: ${(err as Error).message}`);
      throw err;
    }
    metrics.revocation("success");
    logger.info(`Revoked share ${id} (${record.kind}, paste ${record.pasteId}) by ${username}`);
    return { before: shareRecordView(record), after: shareRecordView(revoked) };
  }

  private async requireRecord(id: string): Promise<ShareDoc> {
    const record = await this.records.get(id);
    if (!record) throw notFound(`Share ${id} not found`);
    return record;
  }
}

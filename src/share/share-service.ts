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
 */
import { randomBytes } from "node:crypto";
import type { Logger } from "../logs/types.js";
import type { ShareMetrics } from "../metrics/share-metrics.js";
import type { Clock } from "../shared/clock.js";
import { ApiError, conflict } from "../shared/errors.js";
import { createPrivateBinPaste, PasteUpstreamError, type PasteCreated, type PasteRequest, type PrivateBinExpiry } from "./privatebin.js";

export const SHARE_EXPIRIES = ["1h", "1d", "30d", "never"] as const;
export type ShareExpiry = (typeof SHARE_EXPIRIES)[number];
export const SHARE_EXPIRY_DEFAULT: ShareExpiry = "1d";
/** What is shared. */
export type ShareKind = "logs" | "diagnostics" | "crash";

/** Upload text above this many characters keeps its end (the newest lines) and says what was cut. */
export const SHARE_TEXT_CHARS_MAX = 4 * 1024 * 1024;
/** How long one upload may take. */
export const SHARE_UPLOAD_TIMEOUT_MS = 15_000;
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

export interface ShareServiceOptions {
  /** controller.yml `share`. */
  config: { enabled: boolean; defaultPrivate: boolean; serviceUrl: string };
  metrics: ShareMetrics;
  clock: Clock;
  logger: Logger;
  upload?: PasteUploader;
}

export const shareDisabled = () => conflict("Sharing is disabled (share.enabled is false)", "SHARE_DISABLED");

/** Uploads redacted support text. */
export class ShareService {
  private readonly upload: PasteUploader;

  constructor(private readonly options: ShareServiceOptions) {
    this.upload = options.upload ?? createPrivateBinPaste;
  }

  get enabled(): boolean {
    return this.options.config.enabled;
  }

  /** Throws 409 SHARE_DISABLED unless sharing is on; routes call it before gathering anything. */
  requireEnabled(): void {
    if (!this.enabled) throw shareDisabled();
  }

  /** Uploads `text` (already redacted) and answers the link. */
  async share(kind: ShareKind, text: string, options: ShareOptions = {}): Promise<ShareResult> {
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
    logger.info(`Shared ${kind} (${body.length} characters, expiry ${expiry}, ${isPublic ? "public" : "private"}${burnAfterRead ? ", burn after read" : ""})`);
    return {
      url: created.url,
      kind,
      expiry,
      expiresAt: ms === null ? null : new Date(clock.nowMs() + ms).toISOString(),
      public: isPublic,
      burnAfterRead,
      ...(password === undefined ? {} : { password }),
      deleteUrl: created.deleteUrl,
      sizeChars: body.length,
    };
  }
}

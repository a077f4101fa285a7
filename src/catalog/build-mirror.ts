/**
 * The controllers' mirror of catalog builds: a build is downloaded once from its `downloadUrl`,
 * cluster-wide, hashed as it streams, stored in the blob store in chunks of
 * {@link FILE_CHUNK_BYTES} (as large template files are) and recorded (`catalog_mirror`, `_id` =
 * sha256) only when its digest is the one the revision froze. Daemons then fetch it from any
 * controller with their node credential (`GET /api/v1/catalog/artifacts/<sha256>`); the download
 * source never sees a credential and need not be reachable from the nodes.
 *
 * The scheduler asks {@link BuildMirror.check} before it places an instance of a revision with a
 * build: mirrored, it places; otherwise the download starts in the background (once) and the answer
 * is the group's `schedulingIssue` — BUILD_DOWNLOADING while it runs, BUILD_HASH_MISMATCH,
 * BUILD_DOWNLOAD_FAILED or BUILD_DOWNLOAD_TIMEOUT after it failed. Nothing is started, so nothing
 * crashes: a bad catalog entry never trips the crash-loop detector. A failure is kept for
 * `retryAfterMs` before the next attempt (on the injected clock).
 */
import { createHash } from "node:crypto";
import type { Logger } from "../logs/types.js";
import type { Clock } from "../shared/clock.js";
import type { BlobStore, Collection, Doc, DocumentStore } from "../store/ports.js";
import { FILE_CHUNK_BYTES } from "../templates/file-content.js";
import type { FrozenBuild } from "./catalog-schemas.js";

/** Collection owned by {@link BuildMirror}. */
export const CATALOG_MIRROR_COLLECTION = "catalog_mirror";

/** Why a build cannot be started yet: the code and message a group's `schedulingIssue` shows. */
export interface BuildIssue {
  ok: false;
  code: "BUILD_DOWNLOADING" | "BUILD_HASH_MISMATCH" | "BUILD_DOWNLOAD_FAILED" | "BUILD_DOWNLOAD_TIMEOUT" | "BUILD_TOO_LARGE";
  message: string;
}

export type BuildCheck = { ok: true } | BuildIssue;

export interface BuildMirrorOptions {
  documents: DocumentStore;
  blobs: BlobStore;
  clock: Clock;
  logger: Logger;
  /** A whole download may take this long. */
  downloadTimeoutMs: number;
  /** A download that delivers no byte for this long is given up. */
  stallTimeoutMs: number;
  /** A larger build is refused (a typo'd URL pointing at a disk image). */
  downloadBytesMax: number;
  /** How long a failed download is reported before it is tried again. */
  retryAfterMs: number;
  fetch?: typeof fetch;
}

interface MirrorRecord extends Doc {
  sha256: string;
  size: number;
  chunks: string[];
  downloadUrl: string;
  mirroredAt: number;
}

/** Downloads, verifies, stores and serves catalog builds; see the module comment. */
export class BuildMirror {
  private readonly records: Collection<MirrorRecord>;
  private readonly verified = new Set<string>();
  private readonly failures = new Map<string, { atMs: number; issue: BuildIssue }>();
  private readonly downloads = new Map<string, Promise<BuildCheck>>();

  constructor(private readonly options: BuildMirrorOptions) {
    this.records = options.documents.collection<MirrorRecord>(CATALOG_MIRROR_COLLECTION);
  }

  /** Whether `build` can be started now; starts its download when it cannot (see the module comment). */
  async check(build: FrozenBuild): Promise<BuildCheck> {
    if (await this.isMirrored(build.sha256)) return { ok: true };
    const failed = this.failures.get(build.sha256);
    if (failed && this.options.clock.nowMs() - failed.atMs < this.options.retryAfterMs) return failed.issue;
    if (!this.downloads.has(build.sha256)) void this.ensure(build);
    return { ok: false, code: "BUILD_DOWNLOADING", message: `Fetching build ${build.version} (${build.sha256.slice(0, 12)}) from ${build.downloadUrl}` };
  }

  /** Mirrors `build` (one download at a time per build on this controller); the outcome. */
  ensure(build: FrozenBuild): Promise<BuildCheck> {
    let pending = this.downloads.get(build.sha256);
    if (!pending) {
      pending = this.download(build).finally(() => this.downloads.delete(build.sha256));
      this.downloads.set(build.sha256, pending);
    }
    return pending;
  }

  /** The mirrored build's bytes as a stream of its chunks, or null when it is not mirrored (or a chunk is gone). */
  async open(sha256: string): Promise<{ size: number; stream: ReadableStream<Uint8Array> } | null> {
    const record = await this.records.get(sha256);
    if (!record || !(await this.chunksPresent(record))) return null;
    const { blobs } = this.options;
    let next = 0;
    const stream = new ReadableStream<Uint8Array>({
      async pull(controller) {
        if (next >= record.chunks.length) return controller.close();
        const chunk = await blobs.get(record.chunks[next++]);
        if (!chunk) return controller.error(new Error(`a chunk of build ${sha256} vanished while it was served`));
        controller.enqueue(chunk);
      },
    });
    return { size: record.size, stream };
  }

  private async isMirrored(sha256: string): Promise<boolean> {
    if (this.verified.has(sha256)) return true;
    const record = await this.records.get(sha256);
    if (!record || !(await this.chunksPresent(record))) return false;
    this.verified.add(sha256);
    return true;
  }

  private async chunksPresent(record: MirrorRecord): Promise<boolean> {
    for (const chunk of record.chunks) if (!(await this.options.blobs.has(chunk))) return false;
    return true;
  }

  private async download(build: FrozenBuild): Promise<BuildCheck> {
    if (await this.isMirrored(build.sha256)) return { ok: true };
    const { clock, logger } = this.options;
    const outcome = await this.fetchAndStore(build).catch((err: unknown): BuildIssue => ({
      ok: false,
      code: "BUILD_DOWNLOAD_FAILED",
      message: `Build ${build.version}: ${(err as Error).message}`,
    }));
    if (outcome.ok) {
      this.failures.delete(build.sha256);
      this.verified.add(build.sha256);
      logger.info(`Build ${build.version} (${build.sha256.slice(0, 12)}) mirrored from ${build.downloadUrl}`);
    } else {
      this.failures.set(build.sha256, { atMs: clock.nowMs(), issue: outcome });
      logger.warn(outcome.message);
    }
    return outcome;
  }

  private async fetchAndStore(build: FrozenBuild): Promise<BuildCheck> {
    const { clock, blobs } = this.options;
    const abort = new AbortController();
    let timedOut: "total" | "stall" | null = null;
    const total = clock.setTimeout(() => ((timedOut = "total"), abort.abort()), this.options.downloadTimeoutMs, { unref: true });
    let stall = clock.setTimeout(() => ((timedOut = "stall"), abort.abort()), this.options.stallTimeoutMs, { unref: true });
    const progressed = () => {
      stall.cancel();
      stall = clock.setTimeout(() => ((timedOut = "stall"), abort.abort()), this.options.stallTimeoutMs, { unref: true });
    };
    const stored: string[] = [];
    /** Chunks this download added: removed again when it fails. */
    const created: string[] = [];
    let succeeded = false;
    const fail = (code: BuildIssue["code"], message: string): BuildIssue => ({ ok: false, code, message: `Build ${build.version}: ${message}` });
    try {
      const res = await (this.options.fetch ?? fetch)(build.downloadUrl, { signal: abort.signal, redirect: "follow" });
      if (!res.ok) {
        await res.body?.cancel().catch(() => undefined);
        return fail("BUILD_DOWNLOAD_FAILED", `GET ${build.downloadUrl} answered ${res.status}`);
      }
      const whole = createHash("sha256");
      let size = 0;
      let pending: Uint8Array[] = [];
      let pendingBytes = 0;
      const flush = async () => {
        if (pendingBytes === 0) return;
        const data = pending.length === 1 ? pending[0] : Buffer.concat(pending, pendingBytes);
        pending = [];
        pendingBytes = 0;
        const hash = createHash("sha256").update(data).digest("hex");
        if (!(await blobs.has(hash))) created.push(hash);
        stored.push(await blobs.put(data));
      };
      for await (const part of (res.body ?? []) as AsyncIterable<Uint8Array>) {
        progressed();
        size += part.byteLength;
        if (size > this.options.downloadBytesMax) {
          abort.abort();
          return fail("BUILD_TOO_LARGE", `${build.downloadUrl} is larger than ${this.options.downloadBytesMax} bytes`);
        }
        whole.update(part);
        for (let at = 0; at < part.byteLength;) {
          const take = Math.min(FILE_CHUNK_BYTES - pendingBytes, part.byteLength - at);
          pending.push(part.subarray(at, at + take));
          pendingBytes += take;
          at += take;
          if (pendingBytes === FILE_CHUNK_BYTES) await flush();
        }
      }
      await flush();
      const actual = whole.digest("hex");
      if (actual !== build.sha256) {
        return fail("BUILD_HASH_MISMATCH", `${build.downloadUrl} has sha256 ${actual}, the catalog says ${build.sha256}`);
      }
      await this.records.put({ _id: build.sha256, sha256: build.sha256, size, chunks: stored, downloadUrl: build.downloadUrl, mirroredAt: clock.nowMs() });
      succeeded = true;
      return { ok: true };
    } catch (err) {
      if (timedOut === "total") return fail("BUILD_DOWNLOAD_TIMEOUT", `downloading ${build.downloadUrl} took longer than ${this.options.downloadTimeoutMs} ms`);
      if (timedOut === "stall") return fail("BUILD_DOWNLOAD_TIMEOUT", `${build.downloadUrl} sent nothing for ${this.options.stallTimeoutMs} ms`);
      return fail("BUILD_DOWNLOAD_FAILED", `GET ${build.downloadUrl} failed: ${(err as Error).message}`);
    } finally {
      total.cancel();
      stall.cancel();
      if (!succeeded) for (const hash of created) await blobs.delete(hash).catch(() => false);
    }
  }
}

/**
 * The daemon's cache of catalog builds (server jars): a build is fetched once per node from the
 * controller (`GET /api/v1/catalog/artifacts/<sha256>` with the node credential, as the template
 * cache fetches blobs), streamed to disk and hashed on the way, kept under `<dir>/<sha256>` when its
 * digest matches, and copied into each instance directory that starts it. Concurrent starts of one
 * build share one download. At most {@link buildsKeptMax} builds are kept; the least recently used
 * ones beyond that are removed (never one an unfinished install uses).
 */
import { createHash, randomBytes } from "node:crypto";
import { copyFile, mkdir, open, readdir, rename, rm, stat, unlink } from "node:fs/promises";
import { join, resolve, sep } from "node:path";
import { normalizeTemplatePath } from "../wire/template-paths.js";

/** Builds kept on a node (each a server jar of tens of megabytes). */
export const buildsKeptMax = 8;
/** Bound of one build download from the controller (a large jar over a slow link, not a hung controller). */
export const buildRequestTimeoutMsDefault = 300_000;
const shaPattern = /^[0-9a-f]{64}$/;

/** Where builds come from: the controller over HTTP in production. */
export interface BuildSource {
  fetch(sha256: string, signal?: AbortSignal): Promise<AsyncIterable<Uint8Array>>;
}

export class BuildCache {
  /** sha256 → size; Map order is the recency order (oldest first). */
  private readonly kept = new Map<string, number>();
  private readonly downloads = new Map<string, Promise<void>>();
  private readonly inUse = new Map<string, number>();

  private constructor(
    private readonly directory: string,
    private readonly source: BuildSource,
  ) {}

  /** Opens the cache under `directory`, keeping the builds a previous run left there. */
  static async open(directory: string, source: BuildSource): Promise<BuildCache> {
    const cache = new BuildCache(directory, source);
    await rm(join(directory, "tmp"), { recursive: true, force: true });
    await mkdir(join(directory, "tmp"), { recursive: true });
    for (const name of await readdir(directory)) {
      if (shaPattern.test(name)) cache.kept.set(name, (await stat(join(directory, name))).size);
    }
    return cache;
  }

  /** The builds held, oldest use first. */
  list(): string[] {
    return [...this.kept.keys()];
  }

  /**
   * Places build `sha256` at `fileName` (relative, inside `workDir`), fetching it first when this
   * node does not hold it. Rejects on a digest mismatch, a failed fetch or an aborted `signal`.
   */
  async install(sha256: string, workDir: string, fileName: string, signal?: AbortSignal): Promise<void> {
    if (!shaPattern.test(sha256)) throw new Error(`build sha256 is not 64 lower-case hex digits: ${sha256.slice(0, 80)}`);
    const root = resolve(workDir);
    const target = resolve(root, ...normalizeTemplatePath(fileName, "jarFile").split("/"));
    if (!target.startsWith(root + sep)) throw new Error(`jarFile escapes the instance directory: ${fileName}`);
    this.inUse.set(sha256, (this.inUse.get(sha256) ?? 0) + 1);
    try {
      if (!this.kept.has(sha256)) await this.download(sha256, signal);
      signal?.throwIfAborted();
      await mkdir(resolve(target, ".."), { recursive: true });
      await rm(target, { recursive: true, force: true });
      await copyFile(join(this.directory, sha256), target);
      const size = this.kept.get(sha256)!;
      this.kept.delete(sha256);
      this.kept.set(sha256, size);
    } finally {
      const left = (this.inUse.get(sha256) ?? 1) - 1;
      if (left === 0) this.inUse.delete(sha256);
      else this.inUse.set(sha256, left);
    }
    await this.evict();
  }

  private download(sha256: string, signal?: AbortSignal): Promise<void> {
    let pending = this.downloads.get(sha256);
    if (!pending) {
      pending = this.fetchVerified(sha256, signal).finally(() => this.downloads.delete(sha256));
      this.downloads.set(sha256, pending);
    }
    return pending;
  }

  private async fetchVerified(sha256: string, signal?: AbortSignal): Promise<void> {
    const body = await this.source.fetch(sha256, signal);
    const temp = join(this.directory, "tmp", `${sha256}.${randomBytes(6).toString("hex")}`);
    const hash = createHash("sha256");
    let size = 0;
    const handle = await open(temp, "wx");
    try {
      for await (const chunk of body) {
        signal?.throwIfAborted();
        hash.update(chunk);
        size += chunk.byteLength;
        for (let at = 0; at < chunk.byteLength;) at += (await handle.write(chunk, at, chunk.byteLength - at)).bytesWritten;
      }
    } catch (err) {
      await handle.close();
      await unlink(temp).catch(() => undefined);
      throw err;
    }
    await handle.close();
    const actual = hash.digest("hex");
    if (actual !== sha256) {
      await unlink(temp).catch(() => undefined);
      throw new Error(`build ${sha256} arrived with sha256 ${actual}`);
    }
    await rename(temp, join(this.directory, sha256));
    this.kept.set(sha256, size);
  }

  private async evict(): Promise<void> {
    for (const sha256 of [...this.kept.keys()]) {
      if (this.kept.size <= buildsKeptMax) return;
      if (this.inUse.has(sha256) || this.downloads.has(sha256)) continue;
      this.kept.delete(sha256);
      await unlink(join(this.directory, sha256)).catch(() => undefined);
    }
  }
}

/** Options of {@link HttpBuildSource}; functions are read again at every request. */
export interface HttpBuildSourceOptions {
  baseUrl: string | (() => string);
  token: string | (() => string);
  requestTimeoutMs?: number;
  fetch?: typeof fetch;
}

/** A {@link BuildSource} on the controller's artifact route, with the node credential. */
export class HttpBuildSource implements BuildSource {
  constructor(private readonly options: HttpBuildSourceOptions) {}

  async fetch(sha256: string, signal?: AbortSignal): Promise<AsyncIterable<Uint8Array>> {
    const { baseUrl, token } = this.options;
    const base = typeof baseUrl === "function" ? baseUrl() : baseUrl;
    const bearer = typeof token === "function" ? token() : token;
    const timeout = AbortSignal.timeout(this.options.requestTimeoutMs ?? buildRequestTimeoutMsDefault);
    const path = `/api/v1/catalog/artifacts/${sha256}`;
    const res = await (this.options.fetch ?? fetch)(base + path, {
      headers: { authorization: `Bearer ${bearer}` },
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    });
    if (!res.ok) throw new Error(`GET ${path} failed: ${res.status} ${(await res.text()).slice(0, 200)}`);
    return (res.body ?? []) as AsyncIterable<Uint8Array>;
  }
}

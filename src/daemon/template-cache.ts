/**
 * The daemon's template cache: fetches a version's manifest from the controller, downloads only the
 * file blobs it does not already hold, keeps them in a bounded on-disk cache keyed by sha256 (least
 * recently used evicted first, by size), and unpacks template layers in order into an instance
 * directory with `{{var}}` placeholders substituted. A start of an unchanged template downloads no
 * file at all; {@link TemplateCache.status} feeds NODE_CACHE_STATUS.
 *
 * Nothing here holds a large file in memory or blocks the daemon's event loop: blobs stream from the
 * controller to disk and from the cache to the instance directory, hashed chunk by chunk on the way;
 * only files small enough for substitution are read whole.
 */
import { createHash, randomBytes } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { chmod, lstat, mkdir, open, readdir, readFile, rename, rm, stat, unlink, writeFile } from "node:fs/promises";
import { join, resolve, sep } from "node:path";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { decodeText, substituteVariables } from "../wire/template-text.js";
import { isDirEntry, type ManifestEntry } from "../wire/template-manifest.js";
import { normalizeTemplatePath } from "../wire/template-paths.js";

/** The manifest of one version, as the controller's manifest route returns it. */
export interface FetchedManifest {
  templateName: string;
  hash: string;
  variables: Record<string, string>;
  entries: ManifestEntry[];
}

/** Where versions come from (the controller over HTTP in production, anything in tests). */
export interface TemplateSource {
  manifest(templateName: string, version?: string, signal?: AbortSignal): Promise<FetchedManifest>;
  /** A file's bytes, whole or as a stream (read once, as it is written to the cache). */
  blob(templateName: string, sha256: string, version: string, signal?: AbortSignal): Promise<Uint8Array | AsyncIterable<Uint8Array>>;
}

/** One layer to unpack: a template, at a version hash or its current one. */
export interface TemplateLayer {
  name: string;
  version?: string;
}

/** What one unpack did. */
export interface UnpackReport {
  layers: { name: string; hash: string }[];
  filesWritten: number;
  blobsDownloaded: number;
  bytesDownloaded: number;
}

/** Cache occupancy, as NODE_CACHE_STATUS reports it. */
export interface TemplateCacheStatus {
  blobCount: number;
  sizeBytes: number;
  sizeBytesMax: number;
}

/** Options of {@link TemplateCache.open}. */
export interface TemplateCacheOptions {
  directory: string;
  /** Bytes the cache may hold after an unpack; least recently used blobs beyond that are removed. */
  sizeBytesMax: number;
  source: TemplateSource;
  /** Largest file whose placeholders are substituted; larger files are copied as they are. */
  substitutionBytesMax?: number;
}

const SUBSTITUTION_BYTES_MAX_DEFAULT = 4 * 1024 * 1024;
const hashPattern = /^[0-9a-f]{64}$/;

/** The bounded content-addressed cache; create with {@link TemplateCache.open}. */
export class TemplateCache {
  /** sha256 → size; Map order is the recency order (oldest first). */
  private readonly blobs = new Map<string, number>();
  private sizeBytes = 0;

  private constructor(private readonly options: TemplateCacheOptions) {}

  /** Opens the cache under `options.directory`, indexing blobs a previous run left there. */
  static async open(options: TemplateCacheOptions): Promise<TemplateCache> {
    const cache = new TemplateCache(options);
    await rm(join(options.directory, "tmp"), { recursive: true, force: true }); // partial downloads
    await mkdir(join(options.directory, "tmp"), { recursive: true });
    for (const fan of await readdir(options.directory)) {
      if (!/^[0-9a-f]{2}$/.test(fan)) continue;
      for (const name of await readdir(join(options.directory, fan))) {
        if (!hashPattern.test(name)) continue;
        const { size } = await stat(join(options.directory, fan, name));
        cache.blobs.set(name, size);
        cache.sizeBytes += size;
      }
    }
    return cache;
  }

  /** Current occupancy. */
  status(): TemplateCacheStatus {
    return { blobCount: this.blobs.size, sizeBytes: this.sizeBytes, sizeBytesMax: this.options.sizeBytesMax };
  }

  /**
   * Unpacks `layers` in order into `targetDir` (later layers overwrite earlier files). Variables are
   * the layers' own, later layers winning, then `overrides`. An aborted `signal` ends the unpack
   * before the next request or file (an instance stopped while preparing).
   */
  async unpack(
    layers: readonly TemplateLayer[],
    targetDir: string,
    overrides: Readonly<Record<string, string>> = {},
    signal?: AbortSignal,
  ): Promise<UnpackReport> {
    const manifests: FetchedManifest[] = [];
    for (const layer of layers) {
      signal?.throwIfAborted();
      manifests.push(await this.options.source.manifest(layer.name, layer.version, signal));
    }
    const variables: Record<string, string> = {};
    for (const m of manifests) Object.assign(variables, m.variables);
    Object.assign(variables, overrides);

    const report: UnpackReport = {
      layers: manifests.map((m) => ({ name: m.templateName, hash: m.hash })),
      filesWritten: 0,
      blobsDownloaded: 0,
      bytesDownloaded: 0,
    };
    const pinned = new Set<string>();
    const root = resolve(targetDir);
    await mkdir(root, { recursive: true });
    for (const manifest of manifests) {
      for (const entry of manifest.entries) {
        signal?.throwIfAborted();
        // The controller confines paths already; the daemon checks again before touching its disk.
        const relative = normalizeTemplatePath(entry.path, "manifest entry");
        const destination = resolve(root, ...relative.split("/"));
        if (!destination.startsWith(root + sep)) throw new Error(`manifest entry escapes the target: ${entry.path}`);
        if (isDirEntry(entry)) {
          await ensureDirectory(destination);
          continue;
        }
        if (!hashPattern.test(entry.sha256)) throw new Error(`manifest entry has no valid sha256: ${entry.path}`);
        pinned.add(entry.sha256);
        await this.writeFile(manifest, entry.sha256, destination, entry.mode & 0o777, variables, report, signal);
        report.filesWritten++;
      }
    }
    await this.evict(pinned);
    return report;
  }

  private render(data: Uint8Array, variables: Readonly<Record<string, string>>): Uint8Array {
    if (!data.includes(0x7b)) return data;
    const text = decodeText(data);
    if (text === null || !text.includes("{{")) return data;
    return new TextEncoder().encode(substituteVariables(text, variables));
  }

  private pathOf(sha256: string): string {
    return join(this.options.directory, sha256.slice(0, 2), sha256);
  }

  /**
   * Writes blob `sha256` to `destination`, downloading it first when the cache lacks it. The cached
   * copy is checked against its hash as it is copied; a damaged one is dropped and fetched again.
   */
  private async writeFile(
    manifest: FetchedManifest,
    sha256: string,
    destination: string,
    mode: number,
    variables: Readonly<Record<string, string>>,
    report: UnpackReport,
    signal: AbortSignal | undefined,
  ): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      if (!this.blobs.has(sha256)) await this.download(manifest, sha256, report, signal);
      if (await this.copyOut(sha256, destination, mode, variables)) return;
      this.forget(sha256);
      await unlink(this.pathOf(sha256)).catch(() => undefined);
      if (attempt > 0) throw new Error(`blob ${sha256} of ${manifest.templateName} is corrupt in the cache`);
    }
  }

  /** Streams a blob from the controller into the cache, hashing it on the way; corrupt ones are refused. */
  private async download(manifest: FetchedManifest, sha256: string, report: UnpackReport, signal: AbortSignal | undefined): Promise<void> {
    const body = await this.options.source.blob(manifest.templateName, sha256, manifest.hash, signal);
    await mkdir(join(this.options.directory, sha256.slice(0, 2)), { recursive: true });
    const temp = join(this.options.directory, "tmp", `${sha256}.${randomBytes(6).toString("hex")}`);
    const hash = createHash("sha256");
    let size = 0;
    const handle = await open(temp, "wx");
    try {
      for await (const chunk of body instanceof Uint8Array ? [body] : body) {
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
    if (hash.digest("hex") !== sha256) {
      await unlink(temp).catch(() => undefined);
      throw new Error(`blob ${sha256} of ${manifest.templateName} arrived corrupt`);
    }
    report.blobsDownloaded++;
    report.bytesDownloaded += size;
    await rename(temp, this.pathOf(sha256));
    this.touch(sha256, size);
  }

  /**
   * Copies a cached blob to `destination`: a file small enough for substitution is read whole and
   * rendered, a larger one streams. False when the cached copy is gone or its bytes do not match
   * its hash (nothing usable was written then).
   */
  private async copyOut(sha256: string, destination: string, mode: number, variables: Readonly<Record<string, string>>): Promise<boolean> {
    const cached = this.pathOf(sha256);
    const size = this.blobs.get(sha256)!;
    await prepareFileTarget(destination);
    if (size <= (this.options.substitutionBytesMax ?? SUBSTITUTION_BYTES_MAX_DEFAULT)) {
      const data = await readFile(cached).catch(() => null);
      if (data === null || sha256Hex(data) !== sha256) return false;
      await writeFile(destination, this.render(data, variables));
    } else {
      const hash = createHash("sha256");
      const hashing = new Transform({
        transform(chunk: Buffer, _encoding, callback) {
          hash.update(chunk);
          callback(null, chunk);
        },
      });
      const source = createReadStream(cached);
      let sourceFailed = false;
      source.once("error", () => (sourceFailed = true));
      try {
        await pipeline(source, hashing, createWriteStream(destination));
      } catch (err) {
        if (sourceFailed) return false;
        throw err;
      }
      if (hash.digest("hex") !== sha256) return false;
    }
    await chmod(destination, mode || 0o644);
    this.touch(sha256, size);
    return true;
  }

  private touch(sha256: string, size: number): void {
    if (this.blobs.has(sha256)) this.blobs.delete(sha256);
    else this.sizeBytes += size;
    this.blobs.set(sha256, size);
  }

  private forget(sha256: string): void {
    const size = this.blobs.get(sha256);
    if (size === undefined) return;
    this.blobs.delete(sha256);
    this.sizeBytes -= size;
  }

  /** Removes least recently used blobs (never those of the unpack that just ran) until within bounds. */
  private async evict(pinned: ReadonlySet<string>): Promise<void> {
    for (const [sha256] of [...this.blobs]) {
      if (this.sizeBytes <= this.options.sizeBytesMax) return;
      if (pinned.has(sha256)) continue;
      this.forget(sha256);
      // Already forgotten: a file left behind is only disk space, overwritten if the blob comes back.
      await unlink(this.pathOf(sha256)).catch(() => undefined);
    }
  }
}

function sha256Hex(data: Uint8Array): string {
  return createHash("sha256").update(data).digest("hex");
}

async function ensureDirectory(path: string): Promise<void> {
  // Nothing there (or nothing readable): mkdir below creates it or reports the real problem.
  const existing = await lstat(path).catch(() => null);
  if (existing && !existing.isDirectory()) await rm(path, { force: true });
  await mkdir(path, { recursive: true });
}

/** Makes room for a file at `path`: its parent directories, and no directory or link in its place. */
async function prepareFileTarget(path: string): Promise<void> {
  // Nothing there (or nothing readable): the write after it creates the file or reports the real problem.
  const existing = await lstat(path).catch(() => null);
  if (existing && !existing.isFile()) await rm(path, { recursive: true, force: true });
  await mkdir(resolve(path, ".."), { recursive: true });
}

/** Options of {@link HttpTemplateSource}; a function is read again at every request. */
export interface HttpTemplateSourceOptions {
  /** The controller's HTTP base URL (`http://host:port`). */
  baseUrl: string | (() => string);
  /** Bearer token for the manifest and blob routes. */
  token: string | (() => string);
  /** One request (headers and body) may take this long; default {@link templateRequestTimeoutMsDefault}. */
  requestTimeoutMs?: number;
  fetch?: typeof fetch;
}

/** Bound of one manifest or blob request: a large server jar over a slow link, not a hung controller. */
export const templateRequestTimeoutMsDefault = 120_000;

/**
 * A {@link TemplateSource} on the controller's manifest and blob routes. The base URL and token
 * may be functions: the daemon's controller and credential change with every session.
 */
export class HttpTemplateSource implements TemplateSource {
  constructor(private readonly options: HttpTemplateSourceOptions) {}

  async manifest(templateName: string, version?: string, signal?: AbortSignal): Promise<FetchedManifest> {
    const query = version ? `?version=${encodeURIComponent(version)}` : "";
    const res = await this.get(`/api/v1/templates/${encodeURIComponent(templateName)}/manifest${query}`, signal);
    return (await res.json()) as FetchedManifest;
  }

  /** The blob as the response streams it; the cache writes it to disk as it arrives. */
  async blob(templateName: string, sha256: string, version: string, signal?: AbortSignal): Promise<AsyncIterable<Uint8Array>> {
    const res = await this.get(`/api/v1/templates/${encodeURIComponent(templateName)}/blobs/${sha256}?version=${encodeURIComponent(version)}`, signal);
    return (res.body ?? []) as AsyncIterable<Uint8Array>;
  }

  private async get(path: string, signal: AbortSignal | undefined): Promise<Response> {
    const { baseUrl, token } = this.options;
    const base = typeof baseUrl === "function" ? baseUrl() : baseUrl;
    const bearer = typeof token === "function" ? token() : token;
    const timeout = AbortSignal.timeout(this.options.requestTimeoutMs ?? templateRequestTimeoutMsDefault);
    const res = await (this.options.fetch ?? fetch)(base + path, {
      headers: { authorization: `Bearer ${bearer}` },
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    });
    if (!res.ok) throw new Error(`GET ${path} failed: ${res.status} ${(await res.text()).slice(0, 200)}`);
    return res;
  }
}

/**
 * The dashboard's built files (`dist/dashboard/`, written by `npm run build` through Vite), read into
 * memory once when the controller starts: a few hundred kilobytes, so a request never touches the
 * disk and the event loop never waits on it. Compressible files are gzipped once, here, too.
 *
 * Vite names every asset under `assets/` after its content hash, so those are cached for a year
 * (`immutable`); `index.html` and the rest are revalidated on every load (`no-cache` with an ETag),
 * so a new build reaches browsers on their next load.
 */
import { createHash } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import { join, relative, sep } from "node:path";
import { promisify } from "node:util";
import { gzip } from "node:zlib";

const gzipAsync = promisify(gzip);

/** One file of the dashboard, ready to send. */
export interface DashboardAsset {
  body: Uint8Array<ArrayBuffer>;
  /** The gzipped body, when the type compresses and compressing saved something. */
  gzip: Uint8Array<ArrayBuffer> | null;
  contentType: string;
  etag: string;
  cacheControl: string;
}

/** The dashboard's files by path relative to its root (`index.html`, `assets/index-1a2b3c4d.js`). */
export interface DashboardAssets {
  /** Where the files were read from; null when the dashboard was not built. */
  readonly dir: string | null;
  get(path: string): DashboardAsset | undefined;
  readonly size: number;
}

/** Hashed files are never changed under their name: a year, and browsers need not revalidate. */
export const HASHED_ASSET_CACHE_CONTROL = "public, max-age=31536000, immutable";
/** Everything else is revalidated on each load. */
export const UNHASHED_ASSET_CACHE_CONTROL = "no-cache";
/** Files above this are not read into memory: the dashboard has none, a stray one is left out. */
export const DASHBOARD_FILE_BYTES_MAX = 8 * 1024 * 1024;
/** Files in the dashboard directory read at most (a build has a handful). */
export const DASHBOARD_FILES_MAX = 500;

const CONTENT_TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json",
  ".webmanifest": "application/manifest+json",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".woff2": "font/woff2",
  ".txt": "text/plain; charset=utf-8",
};
const COMPRESSIBLE = new Set([".html", ".js", ".css", ".json", ".webmanifest", ".svg", ".txt"]);
/** Vite's file names: `<name>-<8 or more hash characters>.<ext>` under `assets/`. */
const HASHED_NAME = /^assets\/[^/]+-[A-Za-z0-9_-]{8,}\.[a-z0-9]+$/;

/** An empty set of files: the controller serves a short notice instead of the dashboard. */
export const NO_DASHBOARD: DashboardAssets = { dir: null, get: () => undefined, size: 0 };

async function listFiles(dir: string, out: string[]): Promise<void> {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    if (out.length >= DASHBOARD_FILES_MAX) return;
    const full = join(dir, entry.name);
    if (entry.isDirectory()) await listFiles(full, out);
    else if (entry.isFile()) out.push(full);
  }
}

/** Reads the built dashboard under `dir`; {@link NO_DASHBOARD} when it has no `index.html`. */
export async function loadDashboardAssets(dir: string): Promise<DashboardAssets> {
  const files: string[] = [];
  try {
    await listFiles(dir, files);
  } catch {
    return NO_DASHBOARD;
  }
  const assets = new Map<string, DashboardAsset>();
  for (const file of files) {
    const path = relative(dir, file).split(sep).join("/");
    const ext = path.slice(path.lastIndexOf("."));
    const contentType = CONTENT_TYPES[ext];
    if (contentType === undefined) continue;
    const body = new Uint8Array(await readFile(file));
    if (body.byteLength > DASHBOARD_FILE_BYTES_MAX) continue;
    let zipped: Uint8Array<ArrayBuffer> | null = null;
    if (COMPRESSIBLE.has(ext)) {
      const candidate = new Uint8Array(await gzipAsync(body, { level: 9 }));
      if (candidate.byteLength < body.byteLength) zipped = candidate;
    }
    assets.set(path, {
      body,
      gzip: zipped,
      contentType,
      etag: `"${createHash("sha256").update(body).digest("base64url").slice(0, 27)}"`,
      cacheControl: HASHED_NAME.test(path) ? HASHED_ASSET_CACHE_CONTROL : UNHASHED_ASSET_CACHE_CONTROL,
    });
  }
  if (!assets.has("index.html")) return NO_DASHBOARD;
  return { dir, get: (path) => assets.get(path), size: assets.size };
}

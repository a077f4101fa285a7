// Template benchmark: a template of N files / M MB (default 10,000 files, 200 MB) on the embedded
// document store and the filesystem blob store (the development profile), measured through
// TemplateService and TemplateCache:
//   - hash: sha256 of every file plus the manifest digest (in memory, no I/O)
//   - import: the tar.gz of the tree through importArchive (gunzip, tar parse, one blob per file)
//   - new version after changing one file: time and bytes added to the blob store
//   - export: exportArchive (blob reads, tar, gzip)
//   - daemon cache: unpack into a fresh directory, cold (empty cache) and warm (same version)
// Contents are seeded pseudo-random bytes (incompressible) with every fifth file a text file.
//
//   npx tsx scripts/bench/templates.ts [--files 10000] [--mb 200] [--seed 1]
//
// Prints a summary and one machine-readable JSON line (prefix `BENCH_JSON `).
import { createHash } from "node:crypto";
import { mkdtemp, readdir, rm, stat } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { TemplateCache, type TemplateSource } from "../../src/daemon/template-cache.js";
import { createEventBus } from "../../src/events/bus.js";
import { systemClock } from "../../src/shared/clock.js";
import { openFsBlobStore } from "../../src/store/fs-blob-store.js";
import { openDocumentStore } from "../../src/store/open.js";
import { FILE_MODE, manifestHash } from "../../src/templates/manifest.js";
import type { ManifestEntry } from "../../src/wire/template-manifest.js";
import { packTarGz, type TarMember } from "../../src/templates/tar.js";
import { TemplateService } from "../../src/templates/template-service.js";

function argValue(name: string, fallback: number): number {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

const filesCount = argValue("--files", 10_000);
const totalBytes = argValue("--mb", 200) * 1024 * 1024;
const seed = argValue("--seed", 1);

/** mulberry32: seeded, so every run builds the same tree. */
function generator(s: number): () => number {
  let a = s >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A member of the generated tree, its bytes in memory. */
interface BenchMember {
  path: string;
  kind: "file" | "dir";
  mode: number;
  data?: Uint8Array;
}

function toTarMember(m: BenchMember): TarMember {
  if (m.kind === "dir") return { path: m.path, kind: "dir", mode: m.mode };
  const data = m.data!;
  return {
    path: m.path,
    kind: "file",
    mode: m.mode,
    size: data.byteLength,
    data: async function* () {
      yield data;
    },
  };
}

async function bytesOf(stream: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  for await (const part of stream) parts.push(part);
  return Buffer.concat(parts);
}

function buildTree(): BenchMember[] {
  const random = generator(seed);
  const members: BenchMember[] = [];
  const dirs = new Set<string>();
  const meanBytes = totalBytes / filesCount;
  let remaining = totalBytes;
  for (let i = 0; i < filesCount; i++) {
    const dir = `world/region-${i % 50}/chunk-${i % 7}`;
    for (const d of ["world", `world/region-${i % 50}`, dir]) {
      if (!dirs.has(d)) {
        dirs.add(d);
        members.push({ path: d, kind: "dir", mode: 0o755 });
      }
    }
    const size = i === filesCount - 1 ? remaining : Math.min(remaining, Math.max(1, Math.round(meanBytes * 2 * random())));
    remaining -= size;
    const data = Buffer.allocUnsafe(size);
    if (i % 5 === 0) {
      data.fill(`key-${i}={{value}}\n`);
    } else {
      for (let at = 0; at + 4 <= size; at += 4) data.writeUInt32LE((random() * 0x100000000) >>> 0, at);
    }
    members.push({ path: `${dir}/file-${i}.${i % 5 === 0 ? "yml" : "dat"}`, kind: "file", mode: 0o644, data });
  }
  return members;
}

async function directoryBytes(dir: string): Promise<number> {
  let total = 0;
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const full = join(dir, entry.name);
    total += entry.isDirectory() ? await directoryBytes(full) : (await stat(full)).size;
  }
  return total;
}

async function timed<T>(fn: () => Promise<T> | T): Promise<[T, number]> {
  const start = performance.now();
  const value = await fn();
  return [value, Math.round(performance.now() - start)];
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), "cloud-bench-templates-"));
  try {
    const documents = await openDocumentStore({ profile: "development", dataDir: dir, ttlSweepIntervalMs: 0 });
    const blobs = await openFsBlobStore(join(dir, "blobs"));
    const events = createEventBus({ logger: { name: "bench", trace() {}, debug() {}, info() {}, warn() {}, error() {} } as never, clock: systemClock });
    const service = new TemplateService({ documents, blobs, events, clock: systemClock, limits: { unpackedBytesMax: totalBytes + 64 * 1024 * 1024 } });

    const [members, generateMs] = await timed(() => buildTree());
    const [hash, hashMs] = await timed(() => {
      const entries: ManifestEntry[] = members.map((m) => ({
        path: m.path,
        mode: m.kind === "dir" ? 0o040755 : FILE_MODE,
        size: m.data?.byteLength ?? 0,
        sha256: m.data ? createHash("sha256").update(m.data).digest("hex") : "",
      }));
      return manifestHash(entries);
    });
    const [archive, packMs] = await timed(() => bytesOf(packTarGz(members.map(toTarMember))));
    const [imported, importMs] = await timed(() => service.importArchive("bench", archive));
    if (imported.hash !== hash) throw new Error(`import hash ${imported.hash} differs from the computed ${hash}`);
    const blobBytesAfterImport = await directoryBytes(join(dir, "blobs"));

    const changed = members.find((m) => m.kind === "file" && m.path.endsWith(".yml"))!;
    const [, newVersionMs] = await timed(() => service.writeText("bench", changed.path, `${Buffer.from(changed.data!).toString()}changed=1\n`));
    const blobBytesAfterChange = await directoryBytes(join(dir, "blobs"));

    const [exported, exportMs] = await timed(async () => ({ archive: await bytesOf((await service.exportArchive("bench")).stream) }));

    const source: TemplateSource = {
      manifest: (name, version) => service.manifest(name, version),
      blob: (name, sha256, version) => service.blob(name, sha256, version),
    };
    const cache = await TemplateCache.open({ directory: join(dir, "cache"), sizeBytesMax: 2 * totalBytes, source });
    const [cold, coldMs] = await timed(() => cache.unpack([{ name: "bench" }], join(dir, "run-cold"), { value: "v" }));
    const [warm, warmMs] = await timed(() => cache.unpack([{ name: "bench" }], join(dir, "run-warm"), { value: "v" }));
    await documents.close();

    const result = {
      files: filesCount,
      totalBytes,
      generateMs,
      hashMs,
      archiveBytes: archive.byteLength,
      packMs,
      importMs,
      blobBytesAfterImport,
      newVersionMs,
      newVersionBlobBytes: blobBytesAfterChange - blobBytesAfterImport,
      changedFileBytes: changed.data!.byteLength,
      exportMs,
      exportBytes: exported.archive.byteLength,
      cacheColdMs: coldMs,
      cacheColdBlobsDownloaded: cold.blobsDownloaded,
      cacheColdBytesDownloaded: cold.bytesDownloaded,
      cacheWarmMs: warmMs,
      cacheWarmBlobsDownloaded: warm.blobsDownloaded,
      cacheSizeBytes: cache.status().sizeBytes,
      loadAverage1m: Number(loadavg()[0].toFixed(1)),
      node: process.version,
    };
    console.log(`templates: ${filesCount} files, ${(totalBytes / 1048576).toFixed(0)} MB`);
    console.log(`  hash (sha256 of every file + manifest): ${hashMs} ms`);
    console.log(`  import of a ${(archive.byteLength / 1048576).toFixed(1)} MB tar.gz: ${importMs} ms`);
    console.log(`  new version after changing one ${changed.data!.byteLength}-byte file: ${newVersionMs} ms, ${result.newVersionBlobBytes} bytes stored`);
    console.log(`  export: ${exportMs} ms (${(exported.archive.byteLength / 1048576).toFixed(1)} MB)`);
    console.log(`  cache unpack cold: ${coldMs} ms (${cold.blobsDownloaded} blobs, ${cold.bytesDownloaded} bytes fetched)`);
    console.log(`  cache unpack warm: ${warmMs} ms (${warm.blobsDownloaded} blobs fetched)`);
    console.log(`BENCH_JSON ${JSON.stringify(result)}`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

await main();

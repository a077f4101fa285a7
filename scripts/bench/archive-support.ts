// Template archives for the archive benchmarks (archive-event-loop.ts, leader-under-archives.ts) and
// the e2e test of an export from the Raft leader: a tar.gz of N files written to disk (7 of every 10
// files seeded random bytes, i.e. incompressible, 3 of repeated text), its import as a streamed
// multipart upload, its export read to the end, and a probe of GET /api/v1/system/version.
import { randomBytes } from "node:crypto";
import { createWriteStream } from "node:fs";
import { performance } from "node:perf_hooks";
import { pipeline } from "node:stream/promises";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import { createGzip } from "node:zlib";
import tarStream from "tar-stream";
import { multipartFromFile } from "../../test/templates/archive-fixtures.js";

const randomBytesAsync = promisify(randomBytes);

/** Writes a template archive of `files` files of `totalBytes` together to `path`; returns the bytes of its files. */
export async function writeTemplateArchive(path: string, totalBytes: number, files: number): Promise<number> {
  const pack = tarStream.pack();
  const written = pipeline(pack, createGzip(), createWriteStream(path));
  const fileBytes = Math.floor(totalBytes / files);
  const text = Buffer.from("motd=Welcome {{player}}\nmax-players=100\n");
  for (let i = 0; i < files; i++) {
    const compressible = i % 10 >= 7; // 3 of every 10 files are text
    const name = compressible ? `config/c${i}.yml` : `worlds/w${i}/region.mca`;
    const entry = pack.entry({ name, size: fileBytes, mode: 0o644 });
    for (let at = 0; at < fileBytes;) {
      const size = Math.min(1 << 20, fileBytes - at);
      const piece = compressible ? Buffer.alloc(size, text) : await randomBytesAsync(size);
      if (!entry.write(piece)) await new Promise<void>((resolve) => entry.once("drain", () => resolve()));
      at += size;
    }
    await new Promise<void>((resolve, reject) => {
      entry.once("finish", () => resolve());
      entry.once("error", reject);
      entry.end(undefined);
    });
  }
  pack.finalize();
  await written;
  return fileBytes * files;
}

/** POST /api/v1/templates/import?name=… with the archive at `path`; throws unless 201 with `fileBytes` stored. */
export async function importTemplateArchive(url: string, token: string, name: string, path: string, fileBytes: number): Promise<{ hash: string }> {
  const { body, contentType } = multipartFromFile(path, "template.tar.gz");
  const res = await fetch(`${url}/api/v1/templates/import?name=${encodeURIComponent(name)}`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": contentType },
    body,
    duplex: "half",
  } as RequestInit);
  const json = (await res.json()) as { hash: string; sizeBytes: number };
  if (res.status !== 201) throw new Error(`import: ${res.status} ${JSON.stringify(json)}`);
  if (json.sizeBytes !== fileBytes) throw new Error(`import stored ${json.sizeBytes} bytes of files, expected ${fileBytes}`);
  return { hash: json.hash };
}

/** GET /api/v1/templates/{name}/export read to the end; throws unless 200 with the version `hash`. */
export async function exportTemplateArchive(url: string, token: string, name: string, hash: string): Promise<{ bytes: number }> {
  const res = await fetch(`${url}/api/v1/templates/${encodeURIComponent(name)}/export`, { headers: { authorization: `Bearer ${token}` } });
  if (res.status !== 200) throw new Error(`export: ${res.status} ${await res.text()}`);
  let bytes = 0;
  for await (const chunk of res.body!) bytes += chunk.byteLength;
  const answered = res.headers.get("x-template-hash");
  if (answered !== hash) throw new Error(`export: version ${answered}, expected ${hash}`);
  return { bytes };
}

/** A running probe of GET /api/v1/system/version; `stop` answers the latencies (sorted) and failures. */
export interface VersionProbe {
  /** Latencies so far (unsorted), each with the time it ended. */
  readonly samples: { atMs: number; latencyMs: number; ok: boolean }[];
  stop(): Promise<{ latencies: number[]; failures: number }>;
}

/** Samples GET /api/v1/system/version on `url` every `intervalMs` (after each answer) until stopped. */
export function probeVersion(url: string, intervalMs: number): VersionProbe {
  const samples: { atMs: number; latencyMs: number; ok: boolean }[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const startMs = performance.now();
      let ok: boolean;
      try {
        const res = await fetch(`${url}/api/v1/system/version`);
        await res.arrayBuffer();
        ok = res.status === 200;
      } catch {
        ok = false;
      }
      samples.push({ atMs: Date.now(), latencyMs: performance.now() - startMs, ok });
      await sleep(intervalMs);
    }
  })();
  return {
    samples,
    stop: async () => {
      running = false;
      await loop;
      return { latencies: samples.map((s) => s.latencyMs).sort((a, b) => a - b), failures: samples.filter((s) => !s.ok).length };
    },
  };
}

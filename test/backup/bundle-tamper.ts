/**
 * What someone holding a bundle file can do to it: unpack it, change documents, add parts, edit
 * the manifest, and make every checksum, size and count of the manifest agree again, then pack it.
 * The one thing they cannot redo is the cluster's authentication of the manifest: its entry is
 * kept as it was (or dropped), so the bundle is well-formed and consistent but not authentic.
 */
import { createHash } from "node:crypto";
import { gunzipSync } from "node:zlib";
import tarStream from "tar-stream";
import { buildRawTarGz, type RawTarMember } from "../templates/archive-fixtures.js";

export interface TamperEntry {
  name: string;
  type: "file" | "directory";
  data: Buffer;
}

/** manifest.json as an editable object. */
export type EditableManifest = Record<string, any> & {
  id: string;
  createdAt: string;
  collections: { name: string; documentCount: number; file: string; sizeBytes: number; sha256: string }[];
};

/** The entries of a bundle, in archive order. */
export async function unpackBundle(bytes: Uint8Array): Promise<TamperEntry[]> {
  const entries: TamperEntry[] = [];
  const extract = tarStream.extract();
  const done = new Promise<void>((resolve, reject) => {
    extract.on("entry", (header, stream, next) => {
      const chunks: Buffer[] = [];
      stream.on("data", (c: unknown) => chunks.push(c as Buffer));
      stream.on("end", () => {
        entries.push({ name: header.name, type: header.type === "directory" ? "directory" : "file", data: Buffer.concat(chunks) });
        next();
      });
    });
    extract.on("finish", resolve);
    extract.on("error", reject);
  });
  extract.end(gunzipSync(bytes));
  await done;
  return entries;
}

/** Packs entries as a tar.gz (the manifest kept where it is in the list). */
export function packBundle(entries: readonly TamperEntry[]): Buffer {
  return buildRawTarGz(entries.map((e): RawTarMember => ({ name: e.name, typeflag: e.type === "directory" ? "5" : "0", data: e.data })));
}

/** Documents of a collection entry, one object per line. */
export function documentsOf(entries: readonly TamperEntry[], collection: string): Record<string, any>[] {
  const entry = entries.find((e) => e.name === `documents/${collection}.ndjson`);
  if (!entry) return [];
  return entry.data
    .toString("utf8")
    .split("\n")
    .filter((line) => line.length > 0)
    .map((line) => JSON.parse(line) as Record<string, any>);
}

/** Replaces (or adds, before `kv/`) a collection's entry and its manifest line. */
export function setDocuments(entries: TamperEntry[], manifest: EditableManifest, collection: string, docs: readonly Record<string, unknown>[]): void {
  const name = `documents/${collection}.ndjson`;
  const data = Buffer.from(docs.map((d) => JSON.stringify(d) + "\n").join(""), "utf8");
  const existing = entries.find((e) => e.name === name);
  if (existing) existing.data = data;
  else
    entries.splice(
      entries.findIndex((e) => e.name === "kv/"),
      0,
      { name, type: "file", data },
    );
  if (!manifest.collections.some((c) => c.name === collection)) {
    manifest.collections.push({ name: collection, documentCount: 0, file: name, sizeBytes: 0, sha256: "" });
    manifest.collections.sort((a, b) => (a.name < b.name ? -1 : 1));
  }
}

const sha256 = (data: Buffer) => createHash("sha256").update(data).digest("hex");
const lineCount = (data: Buffer) =>
  data
    .toString("utf8")
    .split("\n")
    .filter((l) => l.length > 0).length;

/**
 * Unpacks `bytes`, lets `edit` change the entries and the manifest, then makes the manifest agree
 * with the parts again (every sha256, size and count, the document total and the collection groups)
 * and packs it. The authentication entry is left as it was unless `edit` removes it.
 */
export async function tamperBundle(bytes: Uint8Array, edit: (entries: TamperEntry[], manifest: EditableManifest) => void): Promise<Buffer> {
  const entries = await unpackBundle(bytes);
  const manifestEntry = entries.find((e) => e.name === "manifest.json");
  if (!manifestEntry) throw new Error("the bundle has no manifest");
  const manifest = JSON.parse(manifestEntry.data.toString("utf8")) as EditableManifest;
  edit(entries, manifest);
  const byName = new Map(entries.map((e) => [e.name, e]));
  for (const c of manifest.collections) {
    const entry = byName.get(c.file);
    if (!entry) continue;
    c.sizeBytes = entry.data.byteLength;
    c.sha256 = sha256(entry.data);
    c.documentCount = lineCount(entry.data);
  }
  for (const part of manifest.kv as { file: string; sizeBytes: number; sha256: string; keyCount: number }[]) {
    const entry = byName.get(part.file);
    if (!entry) continue;
    part.sizeBytes = entry.data.byteLength;
    part.sha256 = sha256(entry.data);
    part.keyCount = lineCount(entry.data);
  }
  const index = byName.get(manifest.blobs.index.file);
  if (index) {
    manifest.blobs.index.sizeBytes = index.data.byteLength;
    manifest.blobs.index.sha256 = sha256(index.data);
    manifest.blobs.count = lineCount(index.data);
  }
  manifest.mongoDocumentCount = manifest.collections.reduce((sum, c) => sum + c.documentCount, 0);
  const groups = new Map<string, number>();
  for (const c of manifest.collections) groups.set(c.name.split("_")[0], (groups.get(c.name.split("_")[0]) ?? 0) + 1);
  manifest.collectionPrefixGroups = [...groups.entries()].sort().map(([prefix, collectionCount]) => ({ prefix, collectionCount }));
  manifestEntry.data = Buffer.from(JSON.stringify(manifest, null, 2) + "\n", "utf8");
  return packBundle(entries);
}

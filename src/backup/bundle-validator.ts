/**
 * Verifies a bundle in one streaming pass: every entry is hashed and sized, every document line
 * parsed (a JSON object with a string `_id`, each `_id` once per collection), every key-value line
 * checked against its part's prefix, every blob's bytes hashed against its name. Once the manifest
 * (the last entry) is read, what was found is compared with what it claims. The answer is the
 * validation report; `valid` only when every list in it is empty.
 */
import { createHash } from "node:crypto";
import { Value } from "@sinclair/typebox/value";
import {
  BUNDLE_DIRECTORIES,
  BundleManifestSchema,
  KV_PARTS,
  MANIFEST_ENTRY,
  NON_EMPTY_COLLECTIONS,
  REQUIRED_COLLECTIONS,
  blobEntry,
  prefixGroupOf,
  type BundleManifest,
  type ValidationReport,
} from "./bundle-format.js";
import { BundleRefusal, linesOf, readBundle, type BundleLimits } from "./bundle-reader.js";

/** Longest document or key-value line, in bytes. */
export const LINE_BYTES_MAX = 16 * 1024 * 1024;

interface FoundPart {
  sizeBytes: number;
  sha256: string;
  lines: number;
}

/** The report and, when the manifest could be read, the manifest. */
export interface Verification {
  report: ValidationReport;
  manifest: BundleManifest | null;
}

/** Verifies the bundle at `path` (see the module comment); `id` is the id it is known by, null to take the manifest's. */
export async function verifyBundle(path: string, id: string | null, limits?: BundleLimits): Promise<Verification> {
  const report: ValidationReport = {
    id: id ?? "",
    valid: false,
    missingFiles: [],
    missingDirectories: [],
    missingMongoCollections: [],
    missingMongoCollectionPrefixes: [],
    missingRedisPrefixes: [],
    emptyRequiredFiles: [],
    checksumMismatches: [],
    problems: [],
  };
  const parts = new Map<string, FoundPart>();
  const directories = new Set<string>();
  const blobs = new Set<string>();
  let blobIndex: string[] | null = null;
  let manifestText: string | null = null;
  try {
    for await (const entry of readBundle(path, limits)) {
      if (entry.kind === "directory") {
        directories.add(entry.name);
        continue;
      }
      const hash = createHash("sha256");
      let sizeBytes = 0;
      const counted = (async function* () {
        for await (const chunk of entry.body) {
          hash.update(chunk);
          sizeBytes += chunk.byteLength;
          yield chunk;
        }
      })();
      let lines = 0;
      if (entry.kind === "documents") {
        const ids = new Set<string>();
        for await (const line of linesOf(counted, LINE_BYTES_MAX)) {
          lines++;
          const id = documentIdOf(line);
          if (id === null) throw new BundleRefusal(`${entry.name} line ${lines} is not a document with a string _id`);
          if (ids.has(id)) throw new BundleRefusal(`${entry.name} holds _id ${JSON.stringify(id.slice(0, 100))} twice`);
          ids.add(id);
        }
      } else if (entry.kind === "kv") {
        const prefix = KV_PARTS.find((p) => p.part === entry.key)?.prefix;
        for await (const line of linesOf(counted, LINE_BYTES_MAX)) {
          lines++;
          const pair = keyValueOf(line);
          if (!pair || prefix === undefined || !pair.key.startsWith(prefix)) throw new BundleRefusal(`${entry.name} line ${lines} is not a key of its part`);
        }
      } else if (entry.kind === "blob-index") {
        const index: string[] = [];
        for await (const line of linesOf(counted, 128)) {
          if (!/^[0-9a-f]{64}$/.test(line)) throw new BundleRefusal(`${entry.name} holds ${JSON.stringify(line.slice(0, 80))}, not a blob hash`);
          index.push(line);
        }
        blobIndex = index;
        lines = index.length;
      } else if (entry.kind === "manifest") {
        const chunks: Buffer[] = [];
        for await (const chunk of counted) chunks.push(chunk);
        manifestText = Buffer.concat(chunks).toString("utf8");
      } else {
        for await (const chunk of counted) void chunk;
      }
      const found = { sizeBytes, sha256: hash.digest("hex"), lines };
      if (entry.kind === "blob") {
        blobs.add(entry.key);
        if (found.sha256 !== entry.key) report.checksumMismatches.push(entry.name);
      } else {
        parts.set(entry.name, found);
      }
    }
  } catch (err) {
    if (!(err instanceof BundleRefusal)) throw err;
    report.problems.push(err.message);
    return { report, manifest: null };
  }

  for (const directory of BUNDLE_DIRECTORIES) if (!directories.has(directory)) report.missingDirectories.push(directory);
  const manifest = parseManifest(manifestText, report);
  if (!manifest) return { report: finish(report), manifest: null };
  if (id === null) report.id = manifest.id;
  else if (manifest.id !== id) report.problems.push(`the manifest names backup ${manifest.id}, not ${id}`);

  const claimed = new Set<string>([MANIFEST_ENTRY]);
  const checkPart = (file: string, expected: { sizeBytes: number; sha256: string }, lines: number | null) => {
    claimed.add(file);
    const found = parts.get(file);
    if (!found) report.missingFiles.push(file);
    else if (found.sha256 !== expected.sha256 || found.sizeBytes !== expected.sizeBytes || (lines !== null && found.lines !== lines))
      report.checksumMismatches.push(file);
  };
  for (const collection of manifest.collections) checkPart(collection.file, collection, collection.documentCount);
  for (const part of manifest.kv) checkPart(part.file, part, part.keyCount);
  checkPart(manifest.blobs.index.file, manifest.blobs.index, manifest.blobs.count);
  for (const file of parts.keys()) if (!claimed.has(file)) report.problems.push(`${file} is not listed in the manifest`);
  if (manifest.mongoDocumentCount !== manifest.collections.reduce((sum, c) => sum + c.documentCount, 0))
    report.checksumMismatches.push(`${MANIFEST_ENTRY} mongoDocumentCount`);

  const bundled = new Set(manifest.collections.filter((c) => parts.has(c.file)).map((c) => c.name));
  for (const name of REQUIRED_COLLECTIONS) if (!bundled.has(name)) report.missingMongoCollections.push(name);
  for (const c of manifest.collections) if (!bundled.has(c.name) && !REQUIRED_COLLECTIONS.includes(c.name)) report.missingMongoCollections.push(c.name);
  for (const name of NON_EMPTY_COLLECTIONS) {
    const c = manifest.collections.find((x) => x.name === name);
    if (c && bundled.has(name) && parts.get(c.file)!.lines === 0) report.emptyRequiredFiles.push(c.file);
  }
  const groups = new Set([...bundled].map(prefixGroupOf));
  for (const group of manifest.collectionPrefixGroups) if (!groups.has(group.prefix)) report.missingMongoCollectionPrefixes.push(group.prefix);
  for (const { part, prefix } of KV_PARTS) {
    const declared = manifest.kv.find((k) => k.part === part && k.prefix === prefix);
    if (!declared || !parts.has(declared.file)) report.missingRedisPrefixes.push(prefix);
  }

  const listed = blobIndex ?? [];
  for (const hash of listed) if (!blobs.has(hash)) report.missingFiles.push(blobEntry(hash));
  const listedSet = new Set(listed);
  for (const hash of blobs) if (!listedSet.has(hash)) report.problems.push(`${blobEntry(hash)} is not listed in ${manifest.blobs.index.file}`);
  return { report: finish(report), manifest };
}

function finish(report: ValidationReport): ValidationReport {
  report.valid =
    report.missingFiles.length === 0 &&
    report.missingDirectories.length === 0 &&
    report.missingMongoCollections.length === 0 &&
    report.missingMongoCollectionPrefixes.length === 0 &&
    report.missingRedisPrefixes.length === 0 &&
    report.emptyRequiredFiles.length === 0 &&
    report.checksumMismatches.length === 0 &&
    report.problems.length === 0;
  return report;
}

function parseManifest(text: string | null, report: ValidationReport): BundleManifest | null {
  if (text === null) {
    report.missingFiles.push(MANIFEST_ENTRY);
    return null;
  }
  if (text.trim() === "") {
    report.emptyRequiredFiles.push(MANIFEST_ENTRY);
    return null;
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    report.problems.push(`${MANIFEST_ENTRY} is not JSON`);
    return null;
  }
  const first = Value.Errors(BundleManifestSchema, value).First();
  if (first) {
    report.problems.push(`${MANIFEST_ENTRY}: ${first.path || "/"} ${first.message}`);
    return null;
  }
  return value as BundleManifest;
}

function documentIdOf(line: string): string | null {
  try {
    const doc = JSON.parse(line) as unknown;
    if (typeof doc !== "object" || doc === null || Array.isArray(doc)) return null;
    const id = (doc as { _id?: unknown })._id;
    return typeof id === "string" ? id : null;
  } catch {
    return null;
  }
}

function keyValueOf(line: string): { key: string; value: string } | null {
  try {
    const pair = JSON.parse(line) as { key?: unknown; value?: unknown };
    return typeof pair.key === "string" && typeof pair.value === "string" ? { key: pair.key, value: pair.value } : null;
  } catch {
    return null;
  }
}

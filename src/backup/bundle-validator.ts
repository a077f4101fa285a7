/**
 * Verifies a bundle in one streaming pass: every entry is hashed and sized, every document line
 * parsed (a JSON object with a string `_id`, each `_id` once per collection), every key-value line
 * checked against its part's prefix, every blob's bytes hashed against its name. Once the manifest
 * (the last entry) is read, what was found is compared with what it claims. The answer is the
 * validation report; `valid` only when every list in it is empty. Whether the cluster authenticates
 * the manifest (bundle-auth.ts) is answered beside it: {@link requireAuthentication} makes it a
 * finding where a bundle must be this cluster's.
 *
 * The pass runs on the controller's event loop (parsing and hashing; gunzip is on the thread
 * pool), so it gives the loop a turn after every {@link YIELD_EVERY_BYTES} it reads, whatever the
 * stream's buffering: a verification slows the controller down at most by its share of the CPU.
 */
import { createHash } from "node:crypto";
import { setImmediate as nextTurn } from "node:timers/promises";
import { Value } from "@sinclair/typebox/value";
import { authenticate, type Authentication, type BundleKey } from "./bundle-auth.js";
import {
  BUNDLE_DIRECTORIES,
  BundleManifestSchema,
  KV_PARTS,
  MANIFEST_ENTRY,
  NON_EMPTY_COLLECTIONS,
  REQUIRED_COLLECTIONS,
  blobEntry,
  documentsEntry,
  isBundledCollection,
  prefixGroupOf,
  type BundleManifest,
  type ValidationReport,
} from "./bundle-format.js";
import { BundleRefusal, linesOf, readBundle, type BundleLimits } from "./bundle-reader.js";

/** Longest document or key-value line, in bytes. */
export const LINE_BYTES_MAX = 16 * 1024 * 1024;
/** Bytes read between two turns of the event loop. */
export const YIELD_EVERY_BYTES = 1024 * 1024;

interface FoundPart {
  sizeBytes: number;
  sha256: string;
  lines: number;
}

/** The report and, when the manifest could be read, the manifest; and whether `key` authenticates it. */
export interface Verification {
  /** `valid` judges the bundle's form and content; `authenticated` is set, but not required. */
  report: ValidationReport;
  manifest: BundleManifest | null;
  authentication: Authentication;
}

/**
 * Verifies the bundle at `path` (see the module comment); `id` is the id it is known by, null to
 * take the manifest's; `key` is this cluster's bundle key (null: nothing is authenticated).
 */
export async function verifyBundle(path: string, id: string | null, limits?: BundleLimits, key: BundleKey | null = null): Promise<Verification> {
  const report = emptyReport(id ?? "");
  const parts = new Map<string, FoundPart>();
  const directories = new Set<string>();
  const blobs = new Set<string>();
  let blobIndex: string[] | null = null;
  let manifestBytes: Buffer | null = null;
  let authenticationBytes: Buffer | null = null;
  let sinceTurnBytes = 0;
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
          sinceTurnBytes += chunk.byteLength;
          if (sinceTurnBytes >= YIELD_EVERY_BYTES) {
            sinceTurnBytes = 0;
            await nextTurn();
          }
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
      } else if (entry.kind === "manifest" || entry.kind === "authentication") {
        const chunks: Buffer[] = [];
        for await (const chunk of counted) chunks.push(chunk);
        if (entry.kind === "manifest") manifestBytes = Buffer.concat(chunks);
        else authenticationBytes = Buffer.concat(chunks);
        if (entry.kind === "authentication") continue; // not a part the manifest lists: it authenticates the manifest
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
    return { report, manifest: null, authentication: { authenticated: false, reason: "it could not be read" } };
  }

  for (const directory of BUNDLE_DIRECTORIES) if (!directories.has(directory)) report.missingDirectories.push(directory);
  const manifest = parseManifest(manifestBytes === null ? null : (manifestBytes as Buffer).toString("utf8"), report);
  const authentication = authenticate(key, manifest ? manifestBytes : null, authenticationBytes, manifest?.clusterId);
  report.authenticated = authentication.authenticated;
  if (!manifest) return { report: finish(report), manifest: null, authentication };
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
  const named = new Set<string>();
  for (const collection of manifest.collections) {
    if (named.has(collection.name)) report.problems.push(`the manifest names collection ${collection.name} twice`);
    named.add(collection.name);
    if (!isBundledCollection(collection.name)) report.problems.push(`the manifest names collection ${collection.name}, which a backup bundle never holds`);
    if (collection.file !== documentsEntry(collection.name)) report.problems.push(`the manifest puts collection ${collection.name} in ${collection.file}`);
    checkPart(collection.file, collection, collection.documentCount);
  }
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
  for (const { part, prefix, required } of KV_PARTS) {
    if (!required) continue;
    const declared = manifest.kv.find((k) => k.part === part && k.prefix === prefix);
    if (!declared || !parts.has(declared.file)) report.missingRedisPrefixes.push(prefix);
  }

  const listed = blobIndex ?? [];
  for (const hash of listed) if (!blobs.has(hash)) report.missingFiles.push(blobEntry(hash));
  const listedSet = new Set(listed);
  for (const hash of blobs) if (!listedSet.has(hash)) report.problems.push(`${blobEntry(hash)} is not listed in ${manifest.blobs.index.file}`);
  return { report: finish(report), manifest, authentication };
}

/** A report with no finding yet (`valid` false until a verification sets it). */
export function emptyReport(id: string): ValidationReport {
  return {
    id,
    valid: false,
    missingFiles: [],
    missingDirectories: [],
    missingMongoCollections: [],
    missingMongoCollectionPrefixes: [],
    missingRedisPrefixes: [],
    emptyRequiredFiles: [],
    checksumMismatches: [],
    problems: [],
    authenticated: false,
  };
}

/** Makes a missing authentication a finding of `report` (which is then not valid). */
export function requireAuthentication(report: ValidationReport, authentication: Authentication): ValidationReport {
  report.authenticated = authentication.authenticated;
  if (!authentication.authenticated) {
    report.problems.push(`the bundle is not authenticated by this cluster: ${authentication.reason}`);
    report.valid = false;
  }
  return report;
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
    const pair = JSON.parse(line) as { key?: unknown; value?: unknown; ttlMs?: unknown };
    if (pair.ttlMs !== undefined && !(typeof pair.ttlMs === "number" && Number.isSafeInteger(pair.ttlMs) && pair.ttlMs > 0)) return null;
    return typeof pair.key === "string" && typeof pair.value === "string" ? { key: pair.key, value: pair.value } : null;
  } catch {
    return null;
  }
}

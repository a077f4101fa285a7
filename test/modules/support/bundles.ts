/**
 * Builds module bundles for tests: real `.tgz` files written with the product's own packer from a
 * map of files, signed with a real Ed25519 key, and hostile archives written entry by entry with
 * ustar headers written by hand (links, traversal names, headers that claim more bytes than they bring).
 */
import { createHash, generateKeyPairSync } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { createGzip } from "node:zlib";
import { stringify } from "yaml";
import { packModuleDirectory } from "../../../src/modules/bundle/pack.js";
import { signBundleDigest } from "../../../src/modules/bundle/signature.js";

/** A ustar header block, written field by field (no checks: hostile names and sizes go in as given). */
function ustarHeader(name: string, type: "file" | "symlink" | "link", size: number, linkname = ""): Buffer {
  const block = Buffer.alloc(512);
  const octal = (value: number, length: number) => value.toString(8).padStart(length - 1, "0") + "\0";
  block.write(name, 0, 100, "utf8");
  block.write(octal(type === "file" ? 0o644 : 0o777, 8), 100, "ascii");
  block.write(octal(0, 8), 108, "ascii");
  block.write(octal(0, 8), 116, "ascii");
  block.write(octal(size, 12), 124, "ascii");
  block.write(octal(0, 12), 136, "ascii");
  block.write("        ", 148, "ascii");
  block.write(type === "file" ? "0" : type === "symlink" ? "2" : "1", 156, "ascii");
  block.write(linkname, 157, 100, "utf8");
  block.write("ustar\0", 257, "ascii");
  block.write("00", 263, "ascii");
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(octal(sum, 7) + " ", 148, "ascii");
  return block;
}

/** The repository's development signing key (trusted by the development profile). */
export const DEVELOPMENT_KEY_PATH = join(import.meta.dirname, "../../../examples/motd-module/signing/development-key.pem");

export const developmentPrivateKey = (): Promise<string> => readFile(DEVELOPMENT_KEY_PATH, "utf8");

/** A fresh Ed25519 key pair as PEM. */
export function newSigningKey(): { privateKeyPem: string; publicKeyPem: string } {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519");
  return {
    privateKeyPem: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
    publicKeyPem: publicKey.export({ type: "spki", format: "pem" }).toString(),
  };
}

/** A small manifest (as an object) for module `id`. */
export function manifestOf(id: string, version = "1.0.0", extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { manifestVersion: 2, id, version, backend: { controller: { entrypoint: "backend/index.js" } }, ...extra };
}

/** Writes `files` (path → text or bytes; `META-INF/cloud/module.yaml` may be an object) under `dir` and packs them to `out`. */
export async function buildBundle(dir: string, out: string, files: Record<string, string | Uint8Array | object>): Promise<string> {
  for (const [path, content] of Object.entries(files)) {
    const full = join(dir, path);
    await mkdir(dirname(full), { recursive: true });
    await writeFile(full, typeof content === "string" || content instanceof Uint8Array ? content : stringify(content));
  }
  await mkdir(dirname(out), { recursive: true });
  await packModuleDirectory(dir, out);
  return out;
}

/** The sha256 of a file. */
export async function sha256Of(path: string): Promise<string> {
  return createHash("sha256")
    .update(await readFile(path))
    .digest("hex");
}

/** Signs the bundle at `path` (base64 sidecar text). */
export async function signBundle(path: string, privateKeyPem: string): Promise<string> {
  return signBundleDigest(await sha256Of(path), privateKeyPem);
}

/** One raw tar entry of a hostile archive. */
export type RawEntry =
  | { name: string; type?: "file"; data: string | Uint8Array }
  | { name: string; type: "symlink" | "link"; linkname: string }
  | { name: string; type: "file"; claimedSize: number };

/** A .tgz of raw entries, written exactly as given (no path checks). */
export async function rawTgz(out: string, entries: RawEntry[]): Promise<string> {
  const blocks: Buffer[] = [];
  const pad = (n: number) => Buffer.alloc((512 - (n % 512)) % 512);
  for (const entry of entries) {
    if ("claimedSize" in entry) {
      blocks.push(ustarHeader(entry.name, "file", entry.claimedSize));
      blocks.push(Buffer.alloc(512));
      continue;
    }
    if ("linkname" in entry) {
      blocks.push(ustarHeader(entry.name, entry.type, 0, entry.linkname));
      continue;
    }
    const data = Buffer.from(entry.data);
    blocks.push(ustarHeader(entry.name, "file", data.byteLength));
    blocks.push(data, pad(data.byteLength));
  }
  blocks.push(Buffer.alloc(1024));
  const gzip = createGzip();
  const chunks: Buffer[] = [];
  gzip.on("data", (chunk: Buffer) => chunks.push(chunk));
  const done = new Promise((resolve) => gzip.on("end", resolve));
  gzip.end(Buffer.concat(blocks));
  await done;
  await mkdir(dirname(out), { recursive: true });
  await writeFile(out, Buffer.concat(chunks));
  return out;
}

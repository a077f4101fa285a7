/**
 * Module signatures: a detached Ed25519 signature over the 32-byte sha256 digest of the bundle file
 * (docs/decisions/modules.md, "Signing"). The sidecar holds the 64 signature bytes raw (what
 * `openssl pkeyutl -sign -rawin` writes) or in base64 (what examples/motd-module/build.ts writes). The
 * controller trusts the public keys of `modules.signing.publicKeys` (PEM text or a PEM file's path)
 * and, on the development profile only, the development key of the repository's example module.
 */
import { createHash, createPrivateKey, createPublicKey, sign, verify, type KeyObject } from "node:crypto";
import { readFileSync } from "node:fs";
import { BundleRejected } from "./bundle-error.js";

/** A trusted public key and its id (the first 16 hex digits of the sha256 of its SPKI encoding). */
export interface TrustedKey {
  id: string;
  key: KeyObject;
  /** Where it came from: `config`, `development`. */
  origin: string;
}

const ED25519_SIGNATURE_BYTES = 64;

/** The id of a public key. */
export function keyIdOf(key: KeyObject): string {
  return createHash("sha256")
    .update(key.export({ type: "spki", format: "der" }))
    .digest("hex")
    .slice(0, 16);
}

/** Reads one configured key: PEM text, or the path of a PEM file. Throws naming the entry when it is not an Ed25519 public key. */
export function parsePublicKey(entry: string, origin: string): TrustedKey {
  const pem = entry.trim().startsWith("-----BEGIN") ? entry : readFileSync(entry.trim(), "utf8");
  let key: KeyObject;
  try {
    key = createPublicKey(pem);
  } catch (error) {
    throw new Error(
      `modules.signing.publicKeys: ${entry.trim().startsWith("-----BEGIN") ? "a PEM entry" : entry} is not a public key (${(error as Error).message})`,
      { cause: error },
    );
  }
  if (key.asymmetricKeyType !== "ed25519") throw new Error(`modules.signing.publicKeys: ${origin} key is ${key.asymmetricKeyType}, not ed25519`);
  return { id: keyIdOf(key), key, origin };
}

/** The signature bytes of a sidecar: 64 raw bytes, or their base64 text. */
export function parseSignatureSidecar(data: Uint8Array): Buffer {
  if (data.byteLength === ED25519_SIGNATURE_BYTES) return Buffer.from(data);
  const text = Buffer.from(data).toString("utf8").trim();
  if (/^[A-Za-z0-9+/_-]+={0,2}$/.test(text)) {
    const decoded = Buffer.from(text.replace(/-/g, "+").replace(/_/g, "/"), "base64");
    if (decoded.byteLength === ED25519_SIGNATURE_BYTES) return decoded;
  }
  throw new BundleRejected("signature: the sidecar is neither a 64-byte Ed25519 signature nor its base64 text", true);
}

/** The trusted key that signed `sha256Hex` (the bundle's digest) with `signature`; a {@link BundleRejected} when none did. */
export function verifyBundleSignature(sha256Hex: string, signature: Uint8Array, keys: readonly TrustedKey[]): TrustedKey {
  const bytes = parseSignatureSidecar(signature);
  if (keys.length === 0) throw new BundleRejected("signature: no trusted public key is configured (modules.signing.publicKeys)", true);
  const digest = Buffer.from(sha256Hex, "hex");
  for (const trusted of keys) if (verify(null, digest, trusted.key, bytes)) return trusted;
  throw new BundleRejected(`signature: does not verify against any trusted key (${keys.map((k) => k.id).join(", ")}) for bundle sha256 ${sha256Hex}`, true);
}

/** Signs a bundle digest with an Ed25519 private key (PEM); the base64 sidecar text. */
export function signBundleDigest(sha256Hex: string, privateKeyPem: string): string {
  const key = createPrivateKey(privateKeyPem);
  if (key.asymmetricKeyType !== "ed25519") throw new Error(`the signing key is ${key.asymmetricKeyType}, not ed25519`);
  return sign(null, Buffer.from(sha256Hex, "hex"), key).toString("base64");
}

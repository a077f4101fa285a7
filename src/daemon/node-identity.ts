/**
 * The node's identity in `dataDir` after joining: node id, key, certificate and CA. The key is the
 * node's own (src/daemon/node-key.ts) unless an older controller generated one.
 */
import { createPublicKey, X509Certificate } from "node:crypto";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { NODE_KEY_FILE, writeFileDurably } from "./node-key.js";

/** File names of the node identity inside `dataDir`. */
export const IDENTITY_FILES = { nodeId: "node-id", key: NODE_KEY_FILE, certificate: "node.crt", ca: "ca.crt" } as const;

/** The node's identity after joining. */
export interface NodeIdentity {
  nodeId: string;
  keyPem: string;
  certificatePem: string;
  caPem: string;
}

/** Reads the identity stored in `dataDir`, or null before the node joined. */
export async function readIdentity(dataDir: string): Promise<NodeIdentity | null> {
  const path = (name: string) => join(dataDir, name);
  if (!existsSync(path(IDENTITY_FILES.nodeId))) return null;
  const [nodeId, keyPem, certificatePem, caPem] = await Promise.all(
    [IDENTITY_FILES.nodeId, IDENTITY_FILES.key, IDENTITY_FILES.certificate, IDENTITY_FILES.ca].map((name) => readFile(path(name), "utf8")),
  );
  return { nodeId: nodeId!.trim(), keyPem: keyPem!, certificatePem: certificatePem!, caPem: caPem! };
}

/**
 * Stores the identity; the node id file is written last, so its presence means complete. The key
 * file is written only when the controller generated the key (`keyGenerated`): the node's own key
 * is already there.
 */
export async function writeIdentity(dataDir: string, identity: NodeIdentity, keyGenerated: boolean): Promise<void> {
  if (keyGenerated) await writeFileDurably(dataDir, IDENTITY_FILES.key, identity.keyPem, 0o600);
  await writeFileDurably(dataDir, IDENTITY_FILES.certificate, identity.certificatePem, 0o644);
  await writeFileDurably(dataDir, IDENTITY_FILES.ca, identity.caPem, 0o644);
  await writeFileDurably(dataDir, IDENTITY_FILES.nodeId, `${identity.nodeId}\n`, 0o644);
}

/** True when `certificatePem` is for the public key of `keyPem`; false for anything unreadable. */
export function certificateMatchesKey(certificatePem: string, keyPem: string): boolean {
  try {
    return new X509Certificate(certificatePem).publicKey.equals(createPublicKey(keyPem));
  } catch {
    // An unreadable certificate or key does not match; the caller refuses the answer.
    return false;
  }
}

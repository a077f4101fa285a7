/**
 * The node's own key pair. Before its first join the daemon generates an RSA 2048 key and stores
 * the private key in `dataDir/node.key` (0600, written through a temporary file and a rename, so
 * the file is either absent or complete) *before* sending the public key: every retry of the join,
 * in this process or after a restart, sends the same public key until the join succeeds. The
 * private key never leaves the node.
 */
import { createPrivateKey, createPublicKey, generateKeyPair } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, open, readFile, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";

/** The node key's file in `dataDir` (the identity's `node.key`). */
export const NODE_KEY_FILE = "node.key";
const nodeKeyBits = 2048;
const generateKeyPairAsync = promisify(generateKeyPair);

/** The node's key: the private key (PKCS#8 PEM) and its public key (SPKI PEM). */
export interface NodeKey {
  keyPem: string;
  publicKeyPem: string;
}

/** The public key (SPKI PEM) of a private key PEM; throws when it is not an RSA private key. */
export function publicKeyOf(keyPem: string): string {
  const privateKey = createPrivateKey(keyPem);
  if (privateKey.asymmetricKeyType !== "rsa") throw new Error(`expected an RSA private key, got ${privateKey.asymmetricKeyType ?? "unknown"}`);
  return createPublicKey(privateKey).export({ type: "spki", format: "pem" }).toString();
}

/**
 * The key stored in `dataDir`, or a new one written there first. A stored key that cannot be read
 * as an RSA private key is an error naming the file: replacing it silently would make a join the
 * controller already accepted for the old key impossible to repeat.
 */
export async function loadOrCreateNodeKey(dataDir: string): Promise<NodeKey> {
  const path = join(dataDir, NODE_KEY_FILE);
  if (existsSync(path)) {
    const keyPem = await readFile(path, "utf8");
    try {
      return { keyPem, publicKeyPem: publicKeyOf(keyPem) };
    } catch (err) {
      throw new Error(
        `${path} is not a usable RSA private key (${(err as Error).message}); remove it to generate a new one (a join token already used with it is then needed anew)`,
        {
          cause: err,
        },
      );
    }
  }
  // Asynchronous: generating a 2048-bit key takes tens of milliseconds to seconds of CPU.
  const { privateKey, publicKey } = await generateKeyPairAsync("rsa", {
    modulusLength: nodeKeyBits,
    publicKeyEncoding: { type: "spki", format: "pem" },
    privateKeyEncoding: { type: "pkcs8", format: "pem" },
  });
  await writeFileDurably(dataDir, NODE_KEY_FILE, privateKey, 0o600);
  return { keyPem: privateKey, publicKeyPem: publicKey };
}

/**
 * Writes `dataDir/name` through a temporary file and a rename, with the file and the directory
 * synced: after it returns, the file survives a crash or a power loss, complete and with `mode`.
 */
export async function writeFileDurably(dataDir: string, name: string, content: string, mode: number): Promise<void> {
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const tmp = join(dataDir, `${name}.tmp`);
  // A leftover temporary file would keep its mode: writeFile's mode applies to new files only.
  await rm(tmp, { force: true });
  const file = await open(tmp, "wx", mode);
  try {
    await file.writeFile(content);
    await file.sync();
  } finally {
    await file.close();
  }
  await rename(tmp, join(dataDir, name));
  const dir = await open(dataDir, "r");
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}

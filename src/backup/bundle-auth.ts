/**
 * How a bundle proves which cluster made it: `authentication.json`, the entry after the manifest,
 * holds an HMAC-SHA256 of the manifest's exact bytes. The manifest names the sha256 of every other
 * part, so the HMAC covers the whole bundle.
 *
 * The key is derived (HKDF-SHA256) from the cluster's CA private key, which is Raft-replicated
 * material every controller of the cluster holds, salted with the cluster id: every controller of a
 * cluster verifies what any of them wrote, on the development profile (a single-member cluster) as
 * on production; another cluster, even one started over the same database and so with the same CA,
 * has another id and so another key. The key is never written anywhere (a bundle never holds
 * `cluster_ca` nor the Raft state), so whoever holds a bundle can change it but cannot make it
 * authentic again. The CA is never rotated; if it ever is, bundles made before verify as foreign.
 */
import { createHmac, hkdfSync, timingSafeEqual } from "node:crypto";

/** The key that authenticates bundles, and the cluster it belongs to. */
export interface BundleKey {
  readonly clusterId: string;
  readonly key: Buffer;
}

/** The bundle key of the cluster as it is now, or null while the cluster is not ready (no material yet). */
export type BundleKeySource = () => BundleKey | null;

/** What a cluster service offers for {@link clusterBundleKeySource}. */
export interface ClusterKeyMaterial {
  readonly clusterId: string;
  isReady(): boolean;
  material(): { readonly caKeyPem: string } | null;
}

const ALGORITHM = "HMAC-SHA256";
const KEY_INFO = "cloud-backup manifest authentication v1";
const MAC_CONTEXT = "cloud-backup/manifest\n";
/** Longest authentication.json read. */
export const AUTHENTICATION_BYTES_MAX = 4096;

/** The bundle key of cluster `clusterId` whose secret material is `secret` (see the module comment). */
export function deriveBundleKey(clusterId: string, secret: string): BundleKey {
  const key = Buffer.from(hkdfSync("sha256", Buffer.from(secret, "utf8"), Buffer.from(clusterId, "utf8"), KEY_INFO, 32));
  return { clusterId, key };
}

/** The bundle key of a cluster service, derived once per cluster id and material. */
export function clusterBundleKeySource(cluster: ClusterKeyMaterial): BundleKeySource {
  let cached: { clusterId: string; secret: string; key: BundleKey } | null = null;
  return () => {
    const material = cluster.isReady() ? cluster.material() : null;
    if (!material) return null;
    const clusterId = cluster.clusterId;
    if (!cached || cached.clusterId !== clusterId || cached.secret !== material.caKeyPem)
      cached = { clusterId, secret: material.caKeyPem, key: deriveBundleKey(clusterId, material.caKeyPem) };
    return cached.key;
  };
}

function macOf(key: BundleKey, manifestBytes: Uint8Array): Buffer {
  return createHmac("sha256", key.key).update(MAC_CONTEXT).update(manifestBytes).digest();
}

/** The bytes of `authentication.json` for a manifest's bytes. */
export function authenticationEntry(key: BundleKey, manifestBytes: Uint8Array): Buffer {
  const body = { algorithm: ALGORITHM, clusterId: key.clusterId, mac: macOf(key, manifestBytes).toString("hex") };
  return Buffer.from(JSON.stringify(body) + "\n", "utf8");
}

/** Whether a bundle is authentic, and if not, why (for the validation report and error messages). */
export type Authentication = { authenticated: true } | { authenticated: false; reason: string };

/**
 * Checks `authentication.json` (null when the bundle has none) against the manifest's bytes with
 * this cluster's key (null when the cluster is not ready). `claimedClusterId` is the manifest's, for
 * the message only: nothing in a bundle is believed before the MAC matches.
 */
export function authenticate(
  key: BundleKey | null,
  manifestBytes: Uint8Array | null,
  entry: Uint8Array | null,
  claimedClusterId: string | undefined,
): Authentication {
  if (!manifestBytes) return { authenticated: false, reason: "it has no manifest to authenticate" };
  if (!key) return { authenticated: false, reason: "this cluster is not ready yet, so its key cannot check the bundle; try again in a moment" };
  if (!entry)
    return { authenticated: false, reason: "it carries no authentication (a bundle of another cluster, or one written before bundles were authenticated)" };
  let mac: Buffer | null = null;
  try {
    const parsed = JSON.parse(Buffer.from(entry).toString("utf8")) as { algorithm?: unknown; mac?: unknown };
    if (parsed.algorithm === ALGORITHM && typeof parsed.mac === "string" && /^[0-9a-f]{64}$/.test(parsed.mac)) mac = Buffer.from(parsed.mac, "hex");
  } catch {
    mac = null;
  }
  if (!mac) return { authenticated: false, reason: "its authentication entry is malformed" };
  if (timingSafeEqual(mac, macOf(key, manifestBytes))) return { authenticated: true };
  const origin =
    claimedClusterId && claimedClusterId !== key.clusterId
      ? `its manifest names cluster ${claimedClusterId}, not this cluster (${key.clusterId})`
      : "it was changed after this cluster made it, or another cluster made it";
  return { authenticated: false, reason: origin };
}

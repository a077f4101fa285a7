/**
 * Where the cluster CA lives until the Raft-replicated cluster state owns it: one document in the
 * document store collection `cluster_ca` (id `cluster`). The first controller to start creates it;
 * a concurrent creator loses the insert race and reads the winner's CA, so every controller sharing
 * the store signs with the same CA. See docs/decisions/daemon-stream.md.
 */
import {
  CLUSTER_CA_COLLECTION,
  CLUSTER_CA_DOCUMENT_ID,
  createClusterCa,
  issueNodeCertificate,
  type CertificateAndKey,
  type ClusterCa,
  type StoredClusterCa,
} from "../cluster/identity/ca.js";
import type { Clock } from "../shared/clock.js";
import { DuplicateKeyError, type DocumentStore } from "../store/ports.js";
import { CONTROLLER_CERTIFICATE_NAME } from "../wire/certificate-names.js";

/** Reads the cluster CA, creating and storing it on first use. */
export async function loadOrCreateClusterCa(documents: DocumentStore, clock: Clock): Promise<ClusterCa> {
  const collection = documents.collection<StoredClusterCa>(CLUSTER_CA_COLLECTION);
  const existing = await collection.get(CLUSTER_CA_DOCUMENT_ID);
  if (existing) return { certPem: existing.certPem, keyPem: existing.keyPem };
  const created = createClusterCa({ clock });
  try {
    await collection.insert({ _id: CLUSTER_CA_DOCUMENT_ID, ...created, createdAt: new Date(clock.nowMs()).toISOString() });
    return created;
  } catch (err) {
    if (!(err instanceof DuplicateKeyError)) throw err;
    const winner = await collection.get(CLUSTER_CA_DOCUMENT_ID);
    if (!winner) throw err;
    return { certPem: winner.certPem, keyPem: winner.keyPem };
  }
}

/** A fresh TLS server certificate for this controller's gateway, issued by the cluster CA. */
export function issueControllerCertificate(ca: ClusterCa, hosts: readonly string[], clock: Clock): CertificateAndKey {
  return issueNodeCertificate(ca, { nodeId: CONTROLLER_CERTIFICATE_NAME, hosts, clock });
}

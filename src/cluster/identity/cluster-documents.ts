/**
 * The two documents that tie the document store to the cluster:
 *
 * - `cluster_meta/cluster` {clusterId, createdAt}: which cluster this database belongs to. The
 *   first controller of a cluster inserts it; a controller of another cluster (or a fresh one
 *   without a join token) finding it refuses to start, so two clusters never share a database.
 * - `cluster_ca/cluster`: the daemon gateway's copy of the cluster CA. The Raft-held cluster
 *   material is the source of truth; every controller writes it here before its gateway starts.
 */
import type { ClusterCa } from "./ca.js";
import { CLUSTER_CA_COLLECTION, CLUSTER_CA_DOCUMENT_ID, type StoredClusterCa } from "./ca.js";
import { DuplicateKeyError, type Doc, type DocumentStore } from "../../store/ports.js";

export const CLUSTER_META_COLLECTION = "cluster_meta";
export const CLUSTER_META_DOCUMENT_ID = "cluster";

interface StoredClusterMeta extends Doc {
  clusterId: string;
  createdAt: string;
}

export type CaSyncOutcome = "created" | "unchanged" | "replaced";

/** Reads and writes the cluster documents; see the module comment. */
export class ClusterDocuments {
  constructor(private readonly documents: DocumentStore) {}

  /** The id of the cluster this database belongs to, or null when none claimed it yet. */
  async clusterIdOfStore(): Promise<string | null> {
    const doc = await this.documents.collection<StoredClusterMeta>(CLUSTER_META_COLLECTION).get(CLUSTER_META_DOCUMENT_ID);
    return doc?.clusterId ?? null;
  }

  /**
   * Claims the database for `clusterId` unless another cluster did; returns the id of the cluster
   * the database belongs to afterwards (`clusterId` on success).
   */
  async claimStore(clusterId: string, createdAtMs: number): Promise<string> {
    const collection = this.documents.collection<StoredClusterMeta>(CLUSTER_META_COLLECTION);
    try {
      await collection.insert({ _id: CLUSTER_META_DOCUMENT_ID, clusterId, createdAt: new Date(createdAtMs).toISOString() });
      return clusterId;
    } catch (err) {
      if (!(err instanceof DuplicateKeyError)) throw err;
      const winner = await collection.get(CLUSTER_META_DOCUMENT_ID);
      if (!winner) throw err;
      return winner.clusterId;
    }
  }

  /** The CA the daemon gateway would use, or null when there is none yet. */
  async readGatewayCa(): Promise<ClusterCa | null> {
    const doc = await this.documents.collection<StoredClusterCa>(CLUSTER_CA_COLLECTION).get(CLUSTER_CA_DOCUMENT_ID);
    return doc ? { certPem: doc.certPem, keyPem: doc.keyPem } : null;
  }

  /** Makes the gateway's CA document hold `ca`. */
  async syncGatewayCa(ca: ClusterCa, nowMs: number): Promise<CaSyncOutcome> {
    const collection = this.documents.collection<StoredClusterCa>(CLUSTER_CA_COLLECTION);
    const existing = await collection.get(CLUSTER_CA_DOCUMENT_ID);
    if (existing && existing.certPem === ca.certPem && existing.keyPem === ca.keyPem) return "unchanged";
    await collection.put({
      _id: CLUSTER_CA_DOCUMENT_ID,
      certPem: ca.certPem,
      keyPem: ca.keyPem,
      createdAt: existing?.createdAt ?? new Date(nowMs).toISOString(),
    });
    return existing ? "replaced" : "created";
  }
}

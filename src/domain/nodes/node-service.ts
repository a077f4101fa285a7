/**
 * Nodes: worker hosts running a daemon. The service owns the `nodes` collection (indexed on state)
 * and the certificate revocation list, and applies the operator actions: drain (any state →
 * DRAINING), undrain (DRAINING → ONLINE), cordon and uncordon (the `cordoned` flag), delete, and
 * certificate revoke / unrevoke. The daemon gateway keeps the live fields current through
 * {@link NodeService.upsert} and refuses revoked nodes (docs/decisions/node-states.md).
 */
import type { Clock } from "../../shared/clock.js";
import { conflict, notFound } from "../../shared/errors.js";
import { EventTypes, type NodeDrainCompletedPayload, type NodeDrainRequestedPayload } from "../../events/event-types.js";
import type { EventBus } from "../../events/types.js";
import { RevisionConflictError, type Collection, type Doc, type DocumentStore } from "../../store/ports.js";
import { UPDATE_ATTEMPTS_MAX, updateDocument } from "../shared/conditional-update.js";
import { KeyedMutex, type KeyedLock } from "../shared/keyed-mutex.js";
import { isoFromMs } from "../shared/time.js";
import type { NodeRecord, NodeState } from "./node-schemas.js";

/** Collection owned by {@link NodeService}. */
export const NODES_COLLECTION = "nodes";
/**
 * Revoked node certificates, keyed by node id; owned by {@link NodeService}. Kept apart from the
 * node record so that a revocation outlives the deletion of the record.
 */
export const NODE_CERTIFICATE_REVOCATIONS_COLLECTION = "node_certificate_revocations";
/**
 * Per node id, the moment before which its API credentials (`nd.` tokens) are refused: written when
 * the node is deleted and when its certificate is revoked, so neither a node registering again under
 * the id nor a lifted revocation brings an earlier credential back. Owned by {@link NodeService}.
 */
export const NODE_CREDENTIAL_CUTOFFS_COLLECTION = "node_credential_cutoffs";
/** How long a cut-off is kept after it was written: longer than a node credential lives (24 h). */
export const NODE_CREDENTIAL_CUTOFF_RETENTION_MS = 25 * 60 * 60 * 1000;

/** The stored fields of a node: the record without the computed instance count and revocation. */
export type NodeFields = Omit<NodeRecord, "instanceCount" | "certificateRevoked" | "certificateRevokedAt">;
/**
 * The stored node document, keyed by node id. `sessionEpoch` numbers the node's daemon sessions
 * (one more for each session opened, on whichever controller): the newest session owns liveness.
 */
export type StoredNode = NodeFields & Doc & { sessionEpoch?: number };
/** A revocation of a node's certificate, keyed by node id. */
export type StoredRevocation = Doc & { nodeId: string; revokedAt: string };
/** Credentials of the node issued at or before `cutoffAtMs` are refused; keyed by node id. */
type StoredCredentialCutoff = Doc & { nodeId: string; cutoffAtMs: number; writtenAt: string };

/** Where instance counts come from (the instance service). */
export interface NodeInstanceCounts {
  liveCountByNode(): Promise<Map<string, number>>;
  liveCountForNode(node: string): Promise<number>;
}

/** Values carried by NODE_DRAIN_REQUESTED when an operator drains a node. */
export interface DrainOptions {
  /** How long the daemon lets players leave before it stops the remaining instances. */
  drainTimeoutSeconds: number;
  /** Shown to players moved off the node's instances. */
  kickMessage: string;
}

/** Drain values used unless the composition root passes others. */
export const defaultDrainOptions: DrainOptions = {
  drainTimeoutSeconds: 300,
  kickMessage: "This server is being drained for maintenance.",
};

/** Snapshots of a transition, for the audit log. */
export interface NodeTransition {
  before: NodeRecord;
  after: NodeRecord;
  /** False when the node already was in the target state (no event published). */
  changed: boolean;
}

/** What the daemon gateway reports about a node. */
export type NodeUpsert = Pick<NodeFields, "host"> & Partial<Omit<NodeFields, "id" | "registeredAt">>;

/** Options of {@link NodeService.delete}. */
export interface DeleteNodeOptions {
  /** Delete even when instances on the node are still live (their records are left as they are). */
  force?: boolean;
}

/** Lists nodes and applies the operator actions, publishing NODE_DRAIN_* events. */
export class NodeService {
  private readonly nodes: Collection<StoredNode>;
  private readonly revocations: Collection<StoredRevocation>;
  private readonly credentialCutoffs: Collection<StoredCredentialCutoff>;
  private readonly writes: KeyedLock;
  /** Per node id, who is told when its certificate is revoked (the daemon gateway's connections). */
  private readonly revocationListeners = new Map<string, Set<() => void>>();

  constructor(
    store: DocumentStore,
    private readonly events: EventBus,
    private readonly clock: Clock,
    private readonly instanceCounts: NodeInstanceCounts,
    private readonly drainOptions: DrainOptions = defaultDrainOptions,
    /** Serialises each node's read-modify-writes; the controller passes a cluster-wide lock (several controllers write nodes). */
    writes: KeyedLock = new KeyedMutex(),
  ) {
    this.writes = writes;
    this.nodes = store.collection<StoredNode>(NODES_COLLECTION, {
      indexes: [{ name: "nodes_state", field: "state" }],
    });
    this.revocations = store.collection<StoredRevocation>(NODE_CERTIFICATE_REVOCATIONS_COLLECTION);
    this.credentialCutoffs = store.collection<StoredCredentialCutoff>(NODE_CREDENTIAL_CUTOFFS_COLLECTION, {
      ttl: { name: "node_credential_cutoffs_ttl", field: "writtenAt", seconds: NODE_CREDENTIAL_CUTOFF_RETENTION_MS / 1000 },
    });
  }

  /** Every node (or those in `state`), ordered by id. */
  async list(state?: NodeState): Promise<NodeRecord[]> {
    const [docs, counts, revocations] = await Promise.all([
      this.nodes.find(state ? { state } : {}),
      this.instanceCounts.liveCountByNode(),
      this.revocations.find(),
    ]);
    const revokedAt = new Map(revocations.map((r) => [r.nodeId, r.revokedAt]));
    return docs.map((doc) => toRecord(doc, counts.get(doc.id) ?? 0, revokedAt.get(doc.id) ?? null));
  }

  /** One node; 404 `Node not found: <id>` when unknown. */
  async get(id: string): Promise<NodeRecord> {
    const doc = await this.require(id);
    return this.recordOf(doc);
  }

  /**
   * Any state → DRAINING: the scheduler stops placing instances on the node; running ones continue.
   * Publishes NODE_DRAIN_REQUESTED unless the node already was DRAINING.
   */
  async drain(id: string): Promise<NodeTransition> {
    const transition = await this.transition(id, (doc) => (doc.state === "DRAINING" ? null : "DRAINING"));
    if (transition.changed) {
      this.events.publish(EventTypes.NODE_DRAIN_REQUESTED, {
        nodeId: id,
        shutdownAfterDrain: false,
        drainTimeoutSeconds: this.drainOptions.drainTimeoutSeconds,
        kickMessage: this.drainOptions.kickMessage,
        timestamp: transition.after.drainRequestedAt ?? isoFromMs(this.clock.nowMs()),
      } satisfies NodeDrainRequestedPayload);
    }
    return transition;
  }

  /**
   * DRAINING → ONLINE: placement resumes. Any other state → 409 INVALID_STATE. Publishes
   * NODE_DRAIN_COMPLETED: the drain is over, ended by the operator.
   */
  async undrain(id: string): Promise<NodeTransition> {
    const transition = await this.transition(id, (doc) => {
      if (doc.state !== "DRAINING") {
        throw conflict(`Node ${id} is not DRAINING (state: ${doc.state})`, "INVALID_STATE");
      }
      return "ONLINE";
    });
    this.events.publish(EventTypes.NODE_DRAIN_COMPLETED, { nodeId: id, timestamp: isoFromMs(this.clock.nowMs()) } satisfies NodeDrainCompletedPayload);
    return transition;
  }

  /**
   * Sets the `cordoned` flag: placement skips the node; its state and running instances are
   * untouched. Cordoning a cordoned node changes nothing.
   */
  cordon(id: string): Promise<NodeTransition> {
    return this.change(id, (doc) => (doc.cordoned ? null : { ...doc, cordoned: true }));
  }

  /** Clears the `cordoned` flag: placement may use the node again. Not cordoned → 409 INVALID_STATE. */
  uncordon(id: string): Promise<NodeTransition> {
    return this.change(id, (doc) => {
      if (!doc.cordoned) throw conflict(`Node ${id} is not cordoned`, "INVALID_STATE");
      return { ...doc, cordoned: false };
    });
  }

  /**
   * Removes the node record and answers it as it was. Refused with 409 INVALID_STATE while the node
   * is ONLINE or DRAINING (its daemon holds a stream and would write the record again), and with
   * 409 CONFLICT while instances on it are live, unless `force`. A certificate revocation stays,
   * and every API credential issued to the node so far is refused from now on.
   */
  async delete(id: string, options: DeleteNodeOptions = {}): Promise<NodeRecord> {
    return this.writes.run(id, async (signal) => {
      for (let attempt = 1; ; attempt++) {
        const stored = await this.nodes.getRevisioned(id);
        if (!stored) throw notFound(`Node not found: ${id}`);
        const doc = stored.doc;
        const record = await this.recordOf(doc);
        if (doc.state === "ONLINE" || doc.state === "DRAINING") {
          const hint = "stop its daemon or revoke its certificate first";
          throw conflict(`Node ${id} is ${doc.state}: only an UNREACHABLE or OFFLINE node can be deleted (${hint})`, "INVALID_STATE");
        }
        if (record.instanceCount > 0 && options.force !== true) {
          const instances = record.instanceCount === 1 ? "1 live instance" : `${record.instanceCount} live instances`;
          throw conflict(`Node ${id} has ${instances}; pass force=true to delete it anyway`);
        }
        signal.throwIfAborted();
        // The cut-off first: a delete that was answered never leaves the node's credentials working.
        await this.cutOffCredentials(id);
        try {
          // Only the version judged above: a daemon that reconnected meanwhile made it ONLINE again.
          await this.nodes.deleteIf(id, stored.rev);
        } catch (error) {
          if (error instanceof RevisionConflictError && attempt < UPDATE_ATTEMPTS_MAX) continue;
          throw error;
        }
        return record;
      }
    });
  }

  /**
   * Revokes the node's certificate: from now on its daemon cannot open a stream, and the listeners
   * registered with {@link onCertificateRevoked} (the gateway's connections of that node) are told
   * once the revocation is stored. Revoking a revoked certificate keeps the first revocation time.
   * The node's API credentials issued until now are refused, also after the revocation is lifted.
   */
  async revokeCertificate(id: string): Promise<NodeTransition> {
    const transition = await this.changeRevocation(id, async (current) => {
      if (current) return current.revokedAt;
      const revokedAt = isoFromMs(this.clock.nowMs());
      await this.cutOffCredentials(id);
      await this.revocations.put({ _id: id, nodeId: id, revokedAt });
      return revokedAt;
    });
    for (const listener of [...(this.revocationListeners.get(id) ?? [])]) listener();
    return transition;
  }

  /** Lifts the revocation: the node's daemon may connect again. Not revoked → 409 INVALID_STATE. */
  unrevokeCertificate(id: string): Promise<NodeTransition> {
    return this.changeRevocation(id, async (current) => {
      if (!current) throw conflict(`The certificate of node ${id} is not revoked`, "INVALID_STATE");
      await this.revocations.delete(id);
      return null;
    });
  }

  /**
   * Whether an API credential of node `id` issued at `issuedAtMs` is accepted: its certificate is
   * not revoked, and the node was neither deleted nor revoked after the credential was issued. Read
   * from the store on every call, so a deletion or revocation holds on every controller at once.
   */
  async acceptsCredential(id: string, issuedAtMs: number): Promise<boolean> {
    const [revocation, cutoff] = await Promise.all([this.revocations.get(id), this.credentialCutoffs.get(id)]);
    return revocation === null && (cutoff === null || issuedAtMs > cutoff.cutoffAtMs);
  }

  /** True when the certificate of `id` is revoked; also for a node whose record was deleted. */
  async isCertificateRevoked(id: string): Promise<boolean> {
    return (await this.revocations.get(id)) !== null;
  }

  /**
   * Calls `listener` each time the certificate of `id` is revoked through this service; returns
   * the function that removes it. Listeners run synchronously after the revocation is stored and
   * must not throw.
   */
  onCertificateRevoked(id: string, listener: () => void): () => void {
    let listeners = this.revocationListeners.get(id);
    if (!listeners) this.revocationListeners.set(id, (listeners = new Set()));
    listeners.add(listener);
    return () => {
      listeners.delete(listener);
      if (listeners.size === 0 && this.revocationListeners.get(id) === listeners) this.revocationListeners.delete(id);
    };
  }

  /**
   * Creates or updates a node from what its daemon reports. A new node starts ONLINE unless a
   * state is given; fields not given keep their stored values.
   */
  async upsert(id: string, update: NodeUpsert): Promise<NodeRecord> {
    return this.upsertWith(id, update, (next) => next);
  }

  /** {@link upsert}, with `adjust` applied to the merged document before it is written (under the same lock, at the revision read). */
  private async upsertWith(id: string, update: NodeUpsert, adjust: (next: StoredNode) => StoredNode): Promise<NodeRecord> {
    const next = await this.writes.run(id, (signal) =>
      updateDocument(
        this.nodes,
        id,
        (current) => {
          const merged = adjust(this.upserted(id, current, update));
          return { next: merged, result: merged };
        },
        { signal },
      ),
    );
    return this.recordOf(next);
  }

  /** The node record `update` makes of the stored one (or of none). */
  private upserted(id: string, current: StoredNode | null, update: NodeUpsert): StoredNode {
    const nowIso = isoFromMs(this.clock.nowMs());
    const base: StoredNode = current ?? {
      _id: id,
      id,
      state: "ONLINE",
      host: update.host,
      labels: {},
      version: null,
      totalMemoryMb: 0,
      usedMemoryMb: 0,
      cpuUsage: 0,
      cordoned: false,
      registeredAt: nowIso,
      connectedAt: null,
      lastHeartbeatAt: null,
      drainRequestedAt: null,
    };
    return { ...base, ...update, _id: id, id, registeredAt: base.registeredAt };
  }

  /**
   * A daemon session of the node opened: the record takes `update` (the hello's figures) and the
   * next session epoch, and an UNREACHABLE or OFFLINE node is ONLINE again (DRAINING when a drain is
   * pending: its drainRequestedAt survived the outage). Returns the record and the session's epoch.
   */
  async openSession(id: string, update: NodeUpsert): Promise<{ record: NodeRecord; sessionEpoch: number }> {
    let sessionEpoch = 0;
    const record = await this.upsertWith(id, update, (next) => {
      sessionEpoch = (next.sessionEpoch ?? 0) + 1;
      const back = next.state === "UNREACHABLE" || next.state === "OFFLINE";
      const state = back ? (next.drainRequestedAt !== null ? "DRAINING" : "ONLINE") : next.state;
      // A new session is a daemon that runs again: a shutdown it announced before is over.
      return { ...next, sessionEpoch, state, shuttingDown: false };
    });
    return { record, sessionEpoch };
  }

  /**
   * The session numbered `sessionEpoch` ended. True when it was the node's newest session (no
   * other opened since, on any controller); then, with `markUnreachable`, an ONLINE or DRAINING
   * node becomes UNREACHABLE (a pending drain is kept). A session replaced by a newer one changes
   * nothing: liveness follows the newest session.
   */
  async endSession(id: string, sessionEpoch: number, markUnreachable: boolean): Promise<boolean> {
    return this.writes.run(id, (signal) =>
      updateDocument(
        this.nodes,
        id,
        (current) => {
          if (!current || (current.sessionEpoch ?? 0) > sessionEpoch) return { next: null, result: false };
          const unreachable = markUnreachable && (current.state === "ONLINE" || current.state === "DRAINING");
          return { next: unreachable ? { ...current, state: "UNREACHABLE" as const } : null, result: true };
        },
        { signal },
      ),
    );
  }

  /**
   * UNREACHABLE → OFFLINE (its grace period ended). True once OFFLINE (by this call or another
   * controller's), or when the node is no longer registered; false when it is ONLINE or DRAINING
   * again (a session came back).
   */
  async markOffline(id: string): Promise<boolean> {
    return this.writes.run(id, (signal) =>
      updateDocument(
        this.nodes,
        id,
        (current) => {
          if (!current || current.state === "OFFLINE") return { next: null, result: true };
          if (current.state !== "UNREACHABLE") return { next: null, result: false };
          return { next: { ...current, state: "OFFLINE" as const }, result: true };
        },
        { signal },
      ),
    );
  }

  /** Drain intents still waiting: drained nodes that run live instances (`cloud_workflows_node_drains`). */
  async drainsWaiting(): Promise<number> {
    return (await this.list()).filter((node) => node.drainRequestedAt !== null && node.instanceCount > 0).length;
  }

  /** How many nodes exist. */
  count(): Promise<number> {
    return this.nodes.count();
  }

  private transition(id: string, target: (doc: StoredNode) => NodeState | null): Promise<NodeTransition> {
    return this.change(id, (doc) => {
      const state = target(doc);
      if (state === null) return null;
      return { ...doc, state, drainRequestedAt: state === "DRAINING" ? isoFromMs(this.clock.nowMs()) : null };
    });
  }

  /** Read-modify-write of one node record; `next` answers null when nothing changes. */
  private async change(id: string, next: (doc: StoredNode) => StoredNode | null): Promise<NodeTransition> {
    const { before, after, changed } = await this.writes.run(id, (signal) =>
      updateDocument(
        this.nodes,
        id,
        (before) => {
          if (!before) throw notFound(`Node not found: ${id}`);
          const after = next(before);
          return { next: after, result: { before, after: after ?? before, changed: after !== null } };
        },
        { signal },
      ),
    );
    const [instanceCount, revocation] = await Promise.all([this.instanceCounts.liveCountForNode(id), this.revocations.get(id)]);
    const revokedAt = revocation?.revokedAt ?? null;
    return { before: toRecord(before, instanceCount, revokedAt), after: toRecord(after, instanceCount, revokedAt), changed };
  }

  /** Read-modify-write of one node's revocation; `next` stores the change and answers the new revokedAt. */
  private async changeRevocation(id: string, next: (current: StoredRevocation | null) => Promise<string | null>): Promise<NodeTransition> {
    const { doc, revokedBefore, revokedAfter } = await this.writes.run(id, async () => {
      const doc = await this.require(id);
      const current = await this.revocations.get(id);
      return { doc, revokedBefore: current?.revokedAt ?? null, revokedAfter: await next(current) };
    });
    const instanceCount = await this.instanceCounts.liveCountForNode(id);
    return {
      before: toRecord(doc, instanceCount, revokedBefore),
      after: toRecord(doc, instanceCount, revokedAfter),
      changed: revokedBefore !== revokedAfter,
    };
  }

  /** Refuses every API credential of the node issued until now. */
  private async cutOffCredentials(id: string): Promise<void> {
    const nowMs = this.clock.nowMs();
    await this.credentialCutoffs.put({ _id: id, nodeId: id, cutoffAtMs: nowMs, writtenAt: isoFromMs(nowMs) });
  }

  private async recordOf(doc: StoredNode): Promise<NodeRecord> {
    const [instanceCount, revocation] = await Promise.all([this.instanceCounts.liveCountForNode(doc.id), this.revocations.get(doc.id)]);
    return toRecord(doc, instanceCount, revocation?.revokedAt ?? null);
  }

  private async require(id: string): Promise<StoredNode> {
    const doc = await this.nodes.get(id);
    if (!doc) throw notFound(`Node not found: ${id}`);
    return doc;
  }
}

function toRecord(doc: StoredNode, instanceCount: number, certificateRevokedAt: string | null): NodeRecord {
  return {
    id: doc.id,
    state: doc.state,
    host: doc.host,
    labels: doc.labels,
    version: doc.version,
    totalMemoryMb: doc.totalMemoryMb,
    usedMemoryMb: doc.usedMemoryMb,
    cpuUsage: doc.cpuUsage,
    instanceCount,
    cordoned: doc.cordoned,
    shuttingDown: doc.shuttingDown ?? false,
    registeredAt: doc.registeredAt,
    connectedAt: doc.connectedAt,
    lastHeartbeatAt: doc.lastHeartbeatAt,
    drainRequestedAt: doc.drainRequestedAt,
    certificateRevoked: certificateRevokedAt !== null,
    certificateRevokedAt,
  };
}

/**
 * Nodes: worker hosts running a daemon. The service owns the `nodes` collection (indexed on state)
 * and the operator transitions drain (any state → DRAINING) and undrain (DRAINING → ONLINE). The
 * daemon gateway keeps the live fields current through {@link NodeService.upsert}.
 */
import type { Clock } from "../../shared/clock.js";
import { conflict, notFound } from "../../shared/errors.js";
import { EventTypes, type NodeDrainCompletedPayload, type NodeDrainRequestedPayload } from "../../events/event-types.js";
import type { EventBus } from "../../events/types.js";
import type { Collection, Doc, DocumentStore } from "../../store/ports.js";
import { KeyedMutex } from "../shared/keyed-mutex.js";
import { isoFromMs } from "../shared/time.js";
import type { NodeRecord, NodeState } from "./node-schemas.js";

/** Collection owned by {@link NodeService}. */
export const NODES_COLLECTION = "nodes";

/** The stored fields of a node: the record without the computed instanceCount. */
export type NodeFields = Omit<NodeRecord, "instanceCount">;
/** The stored node document, keyed by node id. */
export type StoredNode = NodeFields & Doc;

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

/** Lists nodes and applies the operator transitions, publishing NODE_DRAIN_* events. */
export class NodeService {
  private readonly nodes: Collection<StoredNode>;
  private readonly writes = new KeyedMutex();

  constructor(
    store: DocumentStore,
    private readonly events: EventBus,
    private readonly clock: Clock,
    private readonly instanceCounts: NodeInstanceCounts,
    private readonly drainOptions: DrainOptions = defaultDrainOptions,
  ) {
    this.nodes = store.collection<StoredNode>(NODES_COLLECTION, {
      indexes: [{ name: "nodes_state", field: "state" }],
    });
  }

  /** Every node (or those in `state`), ordered by id. */
  async list(state?: NodeState): Promise<NodeRecord[]> {
    const [docs, counts] = await Promise.all([
      this.nodes.find(state ? { state } : {}),
      this.instanceCounts.liveCountByNode(),
    ]);
    return docs.map((doc) => toRecord(doc, counts.get(doc.id) ?? 0));
  }

  /** One node; 404 `Node not found: <id>` when unknown. */
  async get(id: string): Promise<NodeRecord> {
    const doc = await this.require(id);
    return toRecord(doc, await this.instanceCounts.liveCountForNode(id));
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
   * Creates or updates a node from what its daemon reports. A new node starts ONLINE unless a
   * state is given; fields not given keep their stored values.
   */
  async upsert(id: string, update: NodeUpsert): Promise<NodeRecord> {
    return this.writes.run(id, async () => {
      const current = await this.nodes.get(id);
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
      const next: StoredNode = { ...base, ...update, _id: id, id, registeredAt: base.registeredAt };
      await this.nodes.put(next);
      return toRecord(next, await this.instanceCounts.liveCountForNode(id));
    });
  }

  /** How many nodes exist. */
  count(): Promise<number> {
    return this.nodes.count();
  }

  private async transition(id: string, target: (doc: StoredNode) => NodeState | null): Promise<NodeTransition> {
    const { before, after, changed } = await this.writes.run(id, async () => {
      const before = await this.require(id);
      const state = target(before);
      if (state === null) return { before, after: before, changed: false };
      const after: StoredNode = {
        ...before,
        state,
        drainRequestedAt: state === "DRAINING" ? isoFromMs(this.clock.nowMs()) : null,
      };
      await this.nodes.put(after);
      return { before, after, changed: true };
    });
    const instanceCount = await this.instanceCounts.liveCountForNode(id);
    return { before: toRecord(before, instanceCount), after: toRecord(after, instanceCount), changed };
  }

  private async require(id: string): Promise<StoredNode> {
    const doc = await this.nodes.get(id);
    if (!doc) throw notFound(`Node not found: ${id}`);
    return doc;
  }
}

function toRecord(doc: StoredNode, instanceCount: number): NodeRecord {
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
    registeredAt: doc.registeredAt,
    connectedAt: doc.connectedAt,
    lastHeartbeatAt: doc.lastHeartbeatAt,
    drainRequestedAt: doc.drainRequestedAt,
  };
}

/**
 * What the daemon stream tells the node records and the event bus: a node connected (ONLINE, or
 * DRAINING when a drain is pending), reported its status, or disconnected (UNREACHABLE). Node
 * states: docs/decisions/node-states.md.
 */
import { EventTypes, type NodeConnectedPayload, type NodeDisconnectedPayload, type NodeStatusPayload } from "../events/event-types.js";
import type { EventBus } from "../events/types.js";
import type { Logger } from "../logs/types.js";
import type { Hello, NodeStatusReport } from "../wire/daemon-proto.js";
import type { GatewayNodes } from "./gateway-types.js";
import { NodeWriteQueue } from "./node-write-queue.js";

/** What the liveness records need: the node service, the bus, a logger and the session registry. */
export interface NodeLivenessDeps {
  nodes: GatewayNodes;
  events: EventBus;
  logger: Logger;
  /** True while this controller holds a session of `nodeId` (a newer one may have replaced the closed one). */
  hasSession(nodeId: string): boolean;
}

/**
 * Records session changes and status reports on node records. Node events go through the node's
 * write queue, so each is published after the record write it follows (a scheduler reacting to
 * NODE_CONNECTED finds the node ONLINE) and in the order the stream saw them; an event is published
 * even when its write failed.
 */
export class NodeLivenessRecords {
  private readonly writes: NodeWriteQueue;

  constructor(private readonly deps: NodeLivenessDeps) {
    this.writes = new NodeWriteQueue(deps.logger);
  }

  /** A session was opened: the record takes the hello's figures, then NODE_CONNECTED is published. */
  connected(nodeId: string, sessionId: string, hello: Hello, nowIso: string): void {
    this.writes.enqueue(nodeId, "the connection", async () => {
      try {
        await this.markConnected(nodeId, hello, nowIso);
      } finally {
        this.deps.events.publish(EventTypes.NODE_CONNECTED, { nodeId, sessionId, timestamp: nowIso } satisfies NodeConnectedPayload);
      }
    });
  }

  /** A status report: the record's usage figures and heartbeat time are updated; NODE_STATUS is published at once. */
  status(nodeId: string, status: NodeStatusReport, nowIso: string): void {
    this.writes.enqueue(nodeId, "the status", async () => {
      const record = await this.deps.nodes.get(nodeId);
      await this.deps.nodes.upsert(nodeId, {
        host: record.host,
        cpuUsage: status.cpu_usage,
        usedMemoryMb: Math.round(status.used_memory_mb),
        totalMemoryMb: Math.round(status.total_memory_mb),
        lastHeartbeatAt: nowIso,
      });
    });
    this.deps.events.publish(EventTypes.NODE_STATUS, {
      nodeId,
      cpuUsage: status.cpu_usage,
      usedMemoryMb: status.used_memory_mb,
      totalMemoryMb: status.total_memory_mb,
      lastHeartbeatAt: nowIso,
    } satisfies NodeStatusPayload);
  }

  /**
   * A session ended: with `markUnreachable` the record becomes UNREACHABLE (unless a newer session
   * holds the node by then), then NODE_DISCONNECTED is published.
   */
  disconnected(nodeId: string, reason: string, timestamp: string, markUnreachable: boolean): void {
    this.writes.enqueue(nodeId, "the disconnection", async () => {
      try {
        if (markUnreachable) await this.markUnreachable(nodeId);
      } finally {
        this.deps.events.publish(EventTypes.NODE_DISCONNECTED, { nodeId, reason, timestamp } satisfies NodeDisconnectedPayload);
      }
    });
  }

  /** Resolves once every record write queued so far has settled (before the stores close). */
  settled(): Promise<void> {
    return this.writes.settled();
  }

  /**
   * UNREACHABLE or OFFLINE → ONLINE on connect, or DRAINING when a drain is pending (its
   * drainRequestedAt survived the outage); ONLINE and DRAINING are kept; a new node starts ONLINE.
   */
  private async markConnected(nodeId: string, hello: Hello, nowIso: string): Promise<void> {
    const record = await this.deps.nodes.upsert(nodeId, {
      host: hello.hostname || "unknown",
      version: hello.daemon_version || null,
      totalMemoryMb: hello.total_memory_mb,
      usedMemoryMb: hello.used_memory_mb,
      connectedAt: nowIso,
      lastHeartbeatAt: nowIso,
    });
    if (record.state === "UNREACHABLE" || record.state === "OFFLINE") {
      await this.deps.nodes.upsert(nodeId, { host: record.host, state: record.drainRequestedAt !== null ? "DRAINING" : "ONLINE" });
    }
  }

  /**
   * ONLINE or DRAINING → UNREACHABLE when the session ends (docs/decisions/node-states.md); a
   * pending drain is remembered through drainRequestedAt, which this write keeps.
   */
  private async markUnreachable(nodeId: string): Promise<void> {
    if (this.deps.hasSession(nodeId)) return;
    const record = await this.deps.nodes.get(nodeId);
    if ((record.state === "ONLINE" || record.state === "DRAINING") && !this.deps.hasSession(nodeId)) {
      await this.deps.nodes.upsert(nodeId, { host: record.host, state: "UNREACHABLE" });
    }
  }
}

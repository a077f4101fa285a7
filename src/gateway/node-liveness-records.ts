/**
 * What the daemon stream tells the node records and the event bus: a node connected (ONLINE, or
 * DRAINING when a drain is pending), reported its status, or disconnected (UNREACHABLE). Every
 * session gets the node's next session epoch when it opens (kept on the node record, so it is
 * shared by every controller); the end of a session that is no longer the node's newest (the
 * daemon went to another controller, or to a new stream here) changes nothing and is not
 * published: liveness follows the newest session. Node states: docs/decisions/node-states.md.
 */
import { EventTypes, type NodeConnectedPayload, type NodeDisconnectedPayload, type NodeStatusPayload } from "../events/event-types.js";
import type { EventBus } from "../events/types.js";
import type { Logger } from "../logs/types.js";
import type { Hello, NodeStatusReport } from "../wire/daemon-proto.js";
import type { GatewayNodes } from "./gateway-types.js";
import { NodeWriteQueue } from "./node-write-queue.js";

/** Attempts to record a session's opening (each bounded by the node record lock's wait). */
const openSessionAttemptsMax = 6;

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
  /** The epoch of each open session of this controller (dropped when it ends). */
  private readonly epochs = new Map<string, number>();
  /** Nodes whose announced shutdown was logged (once per session). */
  private readonly shutdownAnnounced = new Set<string>();

  constructor(private readonly deps: NodeLivenessDeps) {
    this.writes = new NodeWriteQueue(deps.logger);
  }

  /** The epoch of an open session here, once its opening was recorded. */
  epochOf(sessionId: string): number | undefined {
    return this.epochs.get(sessionId);
  }

  /**
   * A session was opened: the record takes the hello's figures and the session's epoch, then
   * NODE_CONNECTED (with `sessionEpoch`) is published.
   */
  connected(nodeId: string, sessionId: string, hello: Hello, nowIso: string): void {
    this.shutdownAnnounced.delete(nodeId);
    this.writes.enqueue(nodeId, "the connection", async () => {
      let sessionEpoch: number | undefined;
      try {
        sessionEpoch = await this.openSession(nodeId, hello, nowIso);
        this.epochs.set(sessionId, sessionEpoch);
      } finally {
        this.deps.events.publish(EventTypes.NODE_CONNECTED, { nodeId, sessionId, timestamp: nowIso, sessionEpoch } satisfies NodeConnectedPayload);
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
        ...(status.shutting_down ? { shuttingDown: true } : {}),
      });
    });
    if (status.shutting_down && !this.shutdownAnnounced.has(nodeId)) {
      this.shutdownAnnounced.add(nodeId);
      this.deps.logger.info(`Node ${nodeId} is shutting down: nothing new is placed on it until it connects again`);
    }
    this.deps.events.publish(EventTypes.NODE_STATUS, {
      nodeId,
      cpuUsage: status.cpu_usage,
      usedMemoryMb: status.used_memory_mb,
      totalMemoryMb: status.total_memory_mb,
      lastHeartbeatAt: nowIso,
    } satisfies NodeStatusPayload);
  }

  /**
   * A session ended. When it was the node's newest session (no newer one opened here or on another
   * controller), with `markUnreachable` the record becomes UNREACHABLE, and NODE_DISCONNECTED (with
   * the session's id and epoch) is published; a superseded session's end changes nothing.
   */
  disconnected(nodeId: string, sessionId: string, reason: string, timestamp: string, markUnreachable: boolean): void {
    this.writes.enqueue(nodeId, "the disconnection", async () => {
      const sessionEpoch = this.epochs.get(sessionId);
      this.epochs.delete(sessionId);
      let newest = true;
      try {
        // A session whose opening was never recorded has no epoch: only the local check applies.
        if (sessionEpoch === undefined) newest = !this.deps.hasSession(nodeId);
        else newest = !this.deps.hasSession(nodeId) && (await this.deps.nodes.endSession(nodeId, sessionEpoch, markUnreachable));
      } finally {
        if (newest) {
          this.deps.events.publish(EventTypes.NODE_DISCONNECTED, { nodeId, reason, timestamp, sessionId, sessionEpoch } satisfies NodeDisconnectedPayload);
        } else {
          this.deps.logger.info(
            `Node ${nodeId}: session ${sessionId} (epoch ${sessionEpoch ?? "unknown"}) ended after a newer one opened: the node stays as it is`,
          );
        }
      }
    });
  }

  /** Resolves once every record write queued so far has settled (before the stores close). */
  settled(): Promise<void> {
    return this.writes.settled();
  }

  /**
   * Records the opening, tried again while the session is open: a session without an epoch is
   * never entered in the session registry, so no other controller could reach the daemon. The
   * node's record lock may be held by a controller that just died (the daemon came here because
   * of that): each attempt waits for the lock at most its wait, and the dead holder's key expires
   * after its TTL, so a few attempts outlast it.
   */
  private async openSession(nodeId: string, hello: Hello, nowIso: string): Promise<number> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.markConnected(nodeId, hello, nowIso);
      } catch (err) {
        if (attempt >= openSessionAttemptsMax || !this.deps.hasSession(nodeId)) throw err;
        this.deps.logger.warn(`Recording the connection of node ${nodeId} failed (attempt ${attempt} of ${openSessionAttemptsMax}); trying again`, err);
      }
    }
  }

  /** Records the opening (the hello's figures, the next epoch; back ONLINE or DRAINING); returns the session's epoch. */
  private async markConnected(nodeId: string, hello: Hello, nowIso: string): Promise<number> {
    const { sessionEpoch } = await this.deps.nodes.openSession(nodeId, {
      host: hello.hostname || "unknown",
      version: hello.daemon_version || null,
      totalMemoryMb: hello.total_memory_mb,
      usedMemoryMb: hello.used_memory_mb,
      connectedAt: nowIso,
      lastHeartbeatAt: nowIso,
    });
    return sessionEpoch;
  }
}

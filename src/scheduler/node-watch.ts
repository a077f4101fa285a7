/**
 * Node watch: a node actor per node, fed with what the daemon gateway decided (NODE_CONNECTED,
 * NODE_DISCONNECTED) and the operator's drain and undrain. The gateway's session owns liveness; the
 * actor keeps the grace period after it: a node UNREACHABLE for `offlineGraceMs` is written OFFLINE
 * and its supervised instances get NODE_LOST, so they are replaced elsewhere.
 *
 * Liveness follows the newest session: a disconnect of a session older than the newest one seen
 * connecting (events carry the session epoch) is ignored, and a node whose grace period ends while
 * some controller holds a session of it is not lost: it is taken back as connected, and its
 * instances are checked against what its daemon runs (the node reconciler) instead of replaced.
 */
import { createActor, type Actor } from "xstate";
import type { NodeTimeouts } from "../../actors/node/node-machine.js";
import type { InstanceEvent } from "../../actors/instance/transitions.js";
import type { NodeEvent, NodeMachineState } from "../../actors/node/transitions.js";
import type { NodeRecord } from "../domain/nodes/node-schemas.js";
import type { NodeService } from "../domain/nodes/node-service.js";
import type { Logger } from "../logs/types.js";
import type { Clock } from "../shared/clock.js";
import { actorClock } from "./actor-clock.js";
import { provideNodeEffects } from "./actor-effects.js";
import type { LiveInstances } from "./live-instances.js";
import type { SupervisedInstances } from "./supervised-instances.js";

type NodeActor = Actor<ReturnType<typeof provideNodeEffects>>;

/** What a node actor is started from: the node's record. */
export type WatchedNode = Pick<NodeRecord, "id" | "host" | "state" | "cordoned" | "drainRequestedAt">;

export interface NodeWatchDeps {
  nodes: Pick<NodeService, "list" | "get" | "markOffline">;
  live: LiveInstances;
  supervised: SupervisedInstances;
  clock: Clock;
  logger: Logger;
  nodeTimeouts: Partial<NodeTimeouts>;
  toInstance(instanceId: string, event: InstanceEvent): void;
  /** Node records changed: the next placement reads them again. */
  invalidateNodes(): void;
  /** A node's daemon connected (again): what waits for it can be sent now, and what it runs is checked. */
  reconnected(nodeId: string): void;
  /** The host a node reported (its machine): placement keys ports and ledgers by it. */
  hostSeen(nodeId: string, host: string): void;
  /** Whether any controller holds a daemon session of the node now. */
  sessionHeld(nodeId: string): Promise<boolean>;
  /** A node can take instances again (connected, undrained): the groups evaluate. */
  capacityAdded(): void;
  track(work: Promise<unknown>): void;
}

/** The node actors of every known node. */
export class NodeWatch {
  private readonly actors = new Map<string, NodeActor>();
  /** The newest session epoch seen connecting, per node. */
  private readonly newestEpoch = new Map<string, number>();
  private stopped = false;

  constructor(private readonly deps: NodeWatchDeps) {}

  /** Starts an actor per registered node. */
  async start(): Promise<void> {
    this.seen(await this.deps.nodes.list());
  }

  /** Node records read elsewhere (placement): nodes not watched yet get their actor. */
  seen(nodes: readonly WatchedNode[]): void {
    for (const node of nodes) {
      this.deps.hostSeen(node.id, node.host);
      if (!this.stopped) this.startActor(node);
    }
  }

  /**
   * An event about a node; a CONNECTED node not known yet is read from its record first.
   * `sessionEpoch` (CONNECTED, DISCONNECTED): the session it comes from; a DISCONNECTED of a session
   * older than the newest seen connecting is ignored.
   */
  event(nodeId: string, event: NodeEvent, sessionEpoch?: number): void {
    if (sessionEpoch !== undefined) {
      const newest = this.newestEpoch.get(nodeId) ?? 0;
      if (event.type === "DISCONNECTED" && sessionEpoch < newest) {
        this.deps.logger.info(`Node ${nodeId}: the end of session epoch ${sessionEpoch} is ignored: epoch ${newest} connected since`);
        return;
      }
      if (event.type === "CONNECTED" && sessionEpoch > newest) this.newestEpoch.set(nodeId, sessionEpoch);
    }
    const actor = this.actors.get(nodeId);
    if (actor) {
      actor.send(event);
    } else if (event.type === "CONNECTED") {
      this.deps.track(
        this.deps.nodes.get(nodeId).then(
          (node) => {
            this.deps.hostSeen(node.id, node.host);
            if (!this.stopped) this.startActor(node).send(event);
          },
          // The record was deleted since: there is nothing to watch.
          () => undefined,
        ),
      );
    }
    this.deps.invalidateNodes();
    if (event.type === "CONNECTED") this.deps.reconnected(nodeId);
    if (event.type === "CONNECTED" || event.type === "UNDRAIN") this.deps.capacityAdded();
  }

  /** The state of a node's actor, for tests and diagnostics. */
  stateOf(nodeId: string): NodeMachineState | undefined {
    return this.actors.get(nodeId)?.getSnapshot().value as NodeMachineState | undefined;
  }

  stop(): void {
    this.stopped = true;
    for (const actor of this.actors.values()) actor.stop();
    this.actors.clear();
  }

  private startActor(node: Omit<WatchedNode, "host">): NodeActor {
    const existing = this.actors.get(node.id);
    if (existing) return existing;
    const actor = createActor(
      provideNodeEffects({
        disconnected: () => undefined,
        connected: () => undefined,
        drainRequested: () => undefined,
        drainCompleted: () => undefined,
        cordonChanged: () => undefined,
        replaceInstances: (nodeId) => this.deps.track(this.offline(nodeId)),
      }),
      {
        clock: actorClock(this.deps.clock),
        input: {
          nodeId: node.id,
          state: node.state,
          drainRequested: node.drainRequestedAt !== null,
          cordoned: node.cordoned,
          timeouts: this.deps.nodeTimeouts,
        },
      },
    );
    actor.start();
    this.actors.set(node.id, actor);
    return actor;
  }

  /**
   * The node stayed unreachable past its grace period. NODE_LOST is decided only when no controller
   * holds a session of it: then OFFLINE, and its instances are replaced. A node some controller
   * holds (its newest session's connect was missed here, or a late disconnect of an older one
   * slipped through) is taken back as connected and reconciled with what its daemon runs.
   */
  private async offline(nodeId: string): Promise<void> {
    let held: boolean;
    try {
      held = await this.deps.sessionHeld(nodeId);
    } catch (err) {
      // Unknown is not lost: the next disconnect or grace period decides again.
      this.deps.logger.warn(`Node ${nodeId}: cannot tell whether a controller holds its session; not replacing its instances now`, err);
      this.actors.get(nodeId)?.send({ type: "CONNECTED" });
      return;
    }
    if (held) {
      this.deps.logger.warn(`Node ${nodeId}: its grace period ended while a controller holds its session: the node is alive, its instances are reconciled`);
      this.actors.get(nodeId)?.send({ type: "CONNECTED" });
      this.deps.invalidateNodes();
      this.deps.reconnected(nodeId);
      return;
    }
    try {
      if (!(await this.deps.nodes.markOffline(nodeId))) {
        // The record is no longer UNREACHABLE: a session opened (or the node was deleted) since.
        this.deps.logger.info(`Node ${nodeId} is no longer UNREACHABLE: not replacing its instances`);
        this.actors.get(nodeId)?.send({ type: "CONNECTED" });
        this.deps.invalidateNodes();
        return;
      }
    } catch (err) {
      this.deps.logger.error(`Marking node ${nodeId} OFFLINE failed`, err);
    }
    const lost = this.deps.live.onNode(nodeId).filter((i) => this.deps.supervised.has(i.id));
    this.deps.logger.warn(`Node ${nodeId} is OFFLINE after its grace period: replacing ${lost.length} instances`);
    for (const instance of lost) this.deps.toInstance(instance.id, { type: "NODE_LOST" });
    this.deps.invalidateNodes();
  }
}

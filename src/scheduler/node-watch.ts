/**
 * Node watch: a node actor per node, fed with what the daemon gateway decided (NODE_CONNECTED,
 * NODE_DISCONNECTED) and the operator's drain and undrain. The gateway's session owns liveness; the
 * actor keeps the grace period after it: a node UNREACHABLE for `offlineGraceMs` is written OFFLINE
 * and its supervised instances get NODE_LOST, so they are replaced elsewhere.
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
  nodes: Pick<NodeService, "list" | "get" | "upsert">;
  live: LiveInstances;
  supervised: SupervisedInstances;
  clock: Clock;
  logger: Logger;
  nodeTimeouts: Partial<NodeTimeouts>;
  toInstance(instanceId: string, event: InstanceEvent): void;
  /** Node records changed: the next placement reads them again. */
  invalidateNodes(): void;
  /** A node's daemon connected (again): what waits for it can be sent now. */
  reconnected(nodeId: string): void;
  /** A node can take instances again (connected, undrained): the groups evaluate. */
  capacityAdded(): void;
  track(work: Promise<unknown>): void;
}

/** The node actors of every known node. */
export class NodeWatch {
  private readonly actors = new Map<string, NodeActor>();
  private stopped = false;

  constructor(private readonly deps: NodeWatchDeps) {}

  /** Starts an actor per registered node. */
  async start(): Promise<void> {
    this.seen(await this.deps.nodes.list());
  }

  /** Node records read elsewhere (placement): nodes not watched yet get their actor. */
  seen(nodes: readonly WatchedNode[]): void {
    for (const node of nodes) {
      this.deps.live.setNodeHost(node.id, node.host);
      if (!this.stopped) this.startActor(node);
    }
  }

  /** An event about a node; a CONNECTED node not known yet is read from its record first. */
  event(nodeId: string, event: NodeEvent): void {
    const actor = this.actors.get(nodeId);
    if (actor) {
      actor.send(event);
    } else if (event.type === "CONNECTED") {
      this.deps.track(
        this.deps.nodes.get(nodeId).then(
          (node) => {
            this.deps.live.setNodeHost(node.id, node.host);
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

  /** The node stayed unreachable past its grace period: OFFLINE, and its instances are replaced. */
  private async offline(nodeId: string): Promise<void> {
    try {
      const record = await this.deps.nodes.get(nodeId);
      if (record.state === "UNREACHABLE") await this.deps.nodes.upsert(nodeId, { host: record.host, state: "OFFLINE" });
    } catch (err) {
      this.deps.logger.error(`Marking node ${nodeId} OFFLINE failed`, err);
    }
    const lost = this.deps.live.onNode(nodeId).filter((i) => this.deps.supervised.has(i.id));
    this.deps.logger.warn(`Node ${nodeId} is OFFLINE after its grace period: replacing ${lost.length} instances`);
    for (const instance of lost) this.deps.toInstance(instance.id, { type: "NODE_LOST" });
    this.deps.invalidateNodes();
  }
}

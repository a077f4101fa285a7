/**
 * Anti-entropy between the owner's records and the nodes: when this controller acquires a scope, and
 * every `reconcileIntervalMs` on the injected Clock after that, it asks each node that runs (or may
 * run) instances of the groups it schedules what it runs now (`list_instances`, through whichever
 * controller holds the node's stream) and hands the answer to the report router. A daemon's final
 * report or inventory may have reached a controller that did not supervise the instance then (the
 * relay between controllers is fire-and-forget); the query is how the owner learns the truth at
 * that moment instead of trusting what it adopted.
 *
 * A node that answers nothing (not connected anywhere, a daemon that predates the query, a timeout)
 * is left alone this round: the node watch's grace period covers a node that is gone. Rounds do not
 * overlap: a round asked for while one runs follows it once.
 */
import type { InstanceState } from "../domain/instances/instance-schemas.js";
import type { Logger } from "../logs/types.js";
import type { Clock, Timer } from "../shared/clock.js";
import type { InstanceStateReport } from "../wire/daemon-proto.js";
import type { LiveInstances } from "./live-instances.js";
import type { SupervisedInstances } from "./supervised-instances.js";

/** Nodes asked at once in one round. */
export const reconcileQueriesInFlightMax = 8;

export interface NodeReconcilerDeps {
  live: LiveInstances;
  supervised: SupervisedInstances;
  clock: Clock;
  logger: Logger;
  intervalMs: number;
  /** Nodes that may run instances of owned groups although none is supervised there (strays); e.g. every node not OFFLINE. */
  otherNodes(): Promise<readonly string[]>;
  /** What the node runs now; null when it cannot be known now (not connected, no answer, an old daemon). */
  listInstances(nodeId: string): Promise<readonly InstanceStateReport[] | null>;
  /** The router's reading of an answer. */
  reconcile(nodeId: string, reports: readonly InstanceStateReport[], asked: ReadonlyMap<string, InstanceState>): Promise<void>;
  /** Whether any scope is owned here (no node queries otherwise). */
  ownsAnything(): boolean;
  /** Runs first in every round, owning or not: the shared placement view read again and repaired (placement-repair.ts). */
  repairPlacement?(): Promise<void>;
}

/** Periodic and on-acquisition reconciliation of the owned instances with their nodes. */
export class NodeReconciler {
  private timer: Timer | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private stopped = false;
  /** Rounds completed (for tests and the log). */
  rounds = 0;

  constructor(private readonly deps: NodeReconcilerDeps) {}

  start(): void {
    this.schedule();
  }

  stop(): void {
    this.stopped = true;
    this.timer?.cancel();
    this.timer = null;
  }

  /** A round now (a scope was acquired); one already running is followed by another. Resolves when done. */
  request(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = this.loop().finally(() => (this.running = null));
    return this.running;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = this.deps.clock.setTimeout(
      () => {
        this.timer = null;
        void this.request().finally(() => this.schedule());
      },
      this.deps.intervalMs,
      { unref: true },
    );
  }

  private async loop(): Promise<void> {
    do {
      this.again = false;
      try {
        await this.round();
      } catch (err) {
        this.deps.logger.error("Reconciling instances with their nodes failed", err);
      }
      this.rounds++;
    } while (this.again && !this.stopped);
  }

  /** One query per node, at most {@link reconcileQueriesInFlightMax} at once. */
  private async round(): Promise<void> {
    try {
      await this.deps.repairPlacement?.();
    } catch (err) {
      this.deps.logger.error("Repairing the shared placement view failed", err);
    }
    if (!this.deps.ownsAnything()) return;
    const nodes = new Set<string>();
    for (const id of this.deps.supervised.ids()) {
      const node = this.deps.live.get(id)?.node;
      if (node) nodes.add(node);
    }
    for (const node of await this.deps.otherNodes()) nodes.add(node);
    const queue = [...nodes];
    const worker = async () => {
      for (let node = queue.shift(); node !== undefined && !this.stopped; node = queue.shift()) await this.node(node);
    };
    await Promise.all(Array.from({ length: Math.min(reconcileQueriesInFlightMax, queue.length) }, worker));
  }

  private async node(nodeId: string): Promise<void> {
    // What this controller believed when it asked: an answer is read against it.
    const asked = new Map<string, InstanceState>();
    for (const instance of this.deps.live.onNode(nodeId)) {
      const state = this.deps.supervised.stateOf(instance.id);
      if (state !== undefined) asked.set(instance.id, state);
    }
    const reports = await this.deps.listInstances(nodeId);
    if (reports === null || this.stopped) return;
    await this.deps.reconcile(nodeId, reports, asked);
  }
}

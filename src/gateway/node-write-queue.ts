/**
 * Writes of node records, queued per node so that one node's writes apply in the order they were
 * asked for (connect, status, disconnect) while different nodes' writes run side by side.
 */
import type { Logger } from "../logs/types.js";

/**
 * Per-node chains of asynchronous writes. A write starts when the node's previous one has
 * settled; a failure is logged ("Recording <what> of node <id> failed") and does not stop the
 * writes behind it. A node's chain is forgotten once it is empty, so the map holds only nodes with
 * writes in flight.
 */
export class NodeWriteQueue {
  private readonly tails = new Map<string, Promise<void>>();

  constructor(private readonly logger: Logger) {}

  /** Queues `write` behind the node's previous writes; `what` names it in the failure log. */
  enqueue(nodeId: string, what: string, write: () => Promise<void>): void {
    const previous = this.tails.get(nodeId) ?? Promise.resolve();
    const next = previous.then(write).catch((err: unknown) => this.logger.error(`Recording ${what} of node ${nodeId} failed`, err));
    this.tails.set(nodeId, next);
    void next.then(() => {
      if (this.tails.get(nodeId) === next) this.tails.delete(nodeId);
    });
  }

  /** Nodes with writes queued or running. */
  get busyNodes(): number {
    return this.tails.size;
  }

  /** Resolves once every write queued so far has settled. */
  async settled(): Promise<void> {
    await Promise.all(this.tails.values());
  }
}

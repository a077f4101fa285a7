/**
 * Pending linearizable reads on the leader (§6.4 of the Raft thesis). A read records the commit
 * index when it arrived; it may be served once a quorum answered a heartbeat that carried its
 * request context, proving this node was still leader at that moment. Contexts are unique per
 * request; a request with a context already pending is ignored.
 */
import type { Message, NodeId } from "./types.js";
import { bytesKey } from "./util.js";

/** A pending read: the request, the commit index when it arrived, and who confirmed leadership. */
export interface ReadIndexStatus {
  readonly request: Message;
  readonly index: number;
  readonly acks: Set<NodeId>;
}

/** The leader's queue of reads awaiting a quorum's confirmation, bounded by `pendingReadsMax`. */
export class ReadOnly {
  private readonly pending = new Map<string, ReadIndexStatus>();
  /** Context keys in arrival order. */
  private queue: string[] = [];

  constructor(readonly pendingReadsMax: number) {}

  get size(): number {
    return this.queue.length;
  }

  /** Records a read at `index`; false when the context is already pending or the queue is full. */
  addRequest(index: number, request: Message): boolean {
    const key = bytesKey(request.context);
    if (this.pending.has(key) || this.queue.length >= this.pendingReadsMax) return false;
    this.pending.set(key, { request, index, acks: new Set() });
    this.queue.push(key);
    return true;
  }

  /** Records that `from` answered the heartbeat carrying `context`; the acks so far, or null. */
  recvAck(from: NodeId, context: Uint8Array): ReadonlySet<NodeId> | null {
    const status = this.pending.get(bytesKey(context));
    if (status === undefined) return null;
    status.acks.add(from);
    return status.acks;
  }

  /**
   * Releases every read queued up to and including the one with `context`: a quorum confirmed
   * leadership after all of them arrived.
   */
  advance(context: Uint8Array): ReadIndexStatus[] {
    const key = bytesKey(context);
    const at = this.queue.indexOf(key);
    if (at < 0) return [];
    const released = this.queue.slice(0, at + 1);
    this.queue = this.queue.slice(at + 1);
    const out: ReadIndexStatus[] = [];
    for (const k of released) {
      out.push(this.pending.get(k)!);
      this.pending.delete(k);
    }
    return out;
  }

  /** Context of the newest pending read, carried by the next heartbeat; null when none. */
  lastPendingContext(): Uint8Array | null {
    if (this.queue.length === 0) return null;
    return this.pending.get(this.queue[this.queue.length - 1])!.request.context;
  }
}

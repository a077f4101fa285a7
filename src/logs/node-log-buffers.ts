/**
 * The daemon log mirror on the controller (spec document 2, "Log record"): one bounded buffer per
 * node whose stream this controller holds, filled with the records the daemon sends over its
 * stream. Every bound is explicit: records per node, characters per node (a record's text fields
 * summed) and the number of nodes kept (the buffer written to least recently goes first). A buffer
 * stays after its daemon disconnected, so the last words of a daemon can still be read; a
 * controller restart clears them all.
 */
import { selectRecords, type LogQuery } from "./log-query.js";
import type { LogRecord } from "./types.js";

/** Records kept per node. */
export const NODE_LOG_RECORDS_MAX = 1_000;
/** Characters (message, throwable, logger, thread, MDC) kept per node: about 2 MB of UTF-16. */
export const NODE_LOG_CHARS_MAX = 1_000_000;
/** Node buffers kept; beyond it the least recently written buffer is dropped. */
export const NODE_LOG_BUFFERS_MAX = 256;
/** Tail listeners per node (SSE clients are capped per controller well below this). */
export const NODE_LOG_LISTENERS_MAX = 200;

/** Bounds of {@link NodeLogBuffers}; tests and benchmarks shrink them. */
export interface NodeLogBounds {
  recordsMax: number;
  charsMax: number;
  buffersMax: number;
}

/** A read of one node's buffer. */
export interface NodeLogRead {
  records: LogRecord[];
  /** Records held for the node. */
  size: number;
  capacity: number;
  /** Records the daemon reported dropped from its own queue, since this controller holds the buffer. */
  droppedOnDaemon: number;
  /** The newest record's number before filtering; 0 when nothing is held. */
  lastSeq: number;
}

const charsOf = (record: LogRecord): number => {
  let chars = record.message.length + record.logger.length + record.thread.length + (record.throwable?.length ?? 0);
  if (record.mdc) for (const [key, value] of Object.entries(record.mdc)) chars += key.length + value.length;
  return chars;
};

class NodeBuffer {
  private records: LogRecord[] = [];
  private start = 0;
  chars = 0;
  droppedOnDaemon = 0;
  readonly listeners = new Set<(record: LogRecord) => void>();

  constructor(private readonly bounds: NodeLogBounds) {}

  get size(): number {
    return this.records.length - this.start;
  }

  push(record: LogRecord): void {
    this.records.push(record);
    this.chars += charsOf(record);
    while (this.size > this.bounds.recordsMax || (this.chars > this.bounds.charsMax && this.size > 1)) {
      this.chars -= charsOf(this.records[this.start]!);
      this.records[this.start] = undefined as unknown as LogRecord;
      this.start++;
    }
    // Compacts once the dead prefix is as long as the live part: amortized O(1) per push.
    if (this.start > 0 && this.start >= this.size) {
      this.records = this.records.slice(this.start);
      this.start = 0;
    }
  }

  toArray(): LogRecord[] {
    return this.records.slice(this.start);
  }
}

/** The per-node buffers of this controller. */
export class NodeLogBuffers {
  private readonly buffers = new Map<string, NodeBuffer>();
  readonly bounds: NodeLogBounds;

  constructor(bounds: Partial<NodeLogBounds> = {}) {
    this.bounds = { recordsMax: NODE_LOG_RECORDS_MAX, charsMax: NODE_LOG_CHARS_MAX, buffersMax: NODE_LOG_BUFFERS_MAX, ...bounds };
  }

  /** Appends a record the daemon of `nodeId` sent; `droppedBefore` counts what its queue lost before it. */
  append(nodeId: string, record: LogRecord, droppedBefore = 0): void {
    let buffer = this.buffers.get(nodeId);
    if (buffer) this.buffers.delete(nodeId);
    else buffer = new NodeBuffer(this.bounds);
    // Re-inserted last: the map's order is the order of the most recent writes.
    this.buffers.set(nodeId, buffer);
    if (this.buffers.size > this.bounds.buffersMax) this.dropLeastRecent(nodeId);
    buffer.droppedOnDaemon += droppedBefore;
    buffer.push(record);
    for (const listener of buffer.listeners) {
      try {
        listener(record);
      } catch {
        // A failing tail listener (a closed stream) must not break the intake of other records.
      }
    }
  }

  /**
   * Drops the least recently written buffer nobody tails (a tailed one stays: there are at most as
   * many of those as stream clients, which are capped).
   */
  private dropLeastRecent(except: string): void {
    for (const [nodeId, buffer] of this.buffers) {
      if (nodeId === except || buffer.listeners.size > 0) continue;
      this.buffers.delete(nodeId);
      return;
    }
  }

  /** Whether this controller holds records (or listeners) for `nodeId`. */
  has(nodeId: string): boolean {
    return this.buffers.has(nodeId);
  }

  /** Reads `nodeId`'s buffer through `query`; empty when nothing was received for it. */
  read(nodeId: string, query: LogQuery = {}): NodeLogRead {
    const buffer = this.buffers.get(nodeId);
    if (!buffer) return { records: [], size: 0, capacity: this.bounds.recordsMax, droppedOnDaemon: 0, lastSeq: 0 };
    const records = buffer.toArray();
    return {
      records: selectRecords(records, query),
      size: buffer.size,
      capacity: this.bounds.recordsMax,
      droppedOnDaemon: buffer.droppedOnDaemon,
      lastSeq: records.at(-1)?.seq ?? 0,
    };
  }

  /** Calls `listener` with every record appended for `nodeId` from now on; returns the unsubscribe function. */
  tail(nodeId: string, listener: (record: LogRecord) => void): () => void {
    let buffer = this.buffers.get(nodeId);
    if (!buffer) {
      buffer = new NodeBuffer(this.bounds);
      this.buffers.set(nodeId, buffer);
    }
    if (buffer.listeners.size >= NODE_LOG_LISTENERS_MAX) throw new RangeError(`too many log tail listeners for node ${nodeId} (max ${NODE_LOG_LISTENERS_MAX})`);
    buffer.listeners.add(listener);
    const held = buffer;
    return () => held.listeners.delete(listener);
  }

  /** Characters held over every node (for the memory bound's tests and benchmark). */
  totalChars(): number {
    let chars = 0;
    for (const buffer of this.buffers.values()) chars += buffer.chars;
    return chars;
  }

  /** Node buffers held. */
  get nodeCount(): number {
    return this.buffers.size;
  }
}

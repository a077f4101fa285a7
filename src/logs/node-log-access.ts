/**
 * The daemon log mirror as the routes read it, whichever controller holds the node's stream. A
 * daemon's records are only on the controller holding its stream (docs/decisions/logs.md):
 *
 * - a read on that controller, or on any controller when no other one holds the stream (the daemon
 *   is connected nowhere, or there is only one controller), answers this controller's buffer;
 * - a read on another controller asks the holder, named by the node-session registry, and answers
 *   its page; a holder that cannot be asked is an error (503 or 502), never an empty page;
 * - a tail follows this controller's buffer as records arrive and, while another controller holds
 *   the stream, polls the holder every {@link NODE_LOG_POLL_INTERVAL_MS} for the records numbered
 *   above the newest one seen. The holder is looked up again on every poll, so a tail follows a
 *   daemon that moves to another controller (or to this one).
 */
import type { Clock, Timer } from "../shared/clock.js";
import { ApiError } from "../shared/errors.js";
import type { LogQuery } from "./log-query.js";
import type { LogSource } from "./log-stream.js";
import type { NodeLogBuffers, NodeLogRead } from "./node-log-buffers.js";

/** How often a tail on a controller without the node's stream asks the holder for new records. */
export const NODE_LOG_POLL_INTERVAL_MS = 500;

/** Where a node's stream is held and how another controller's records are read. */
export interface NodeLogHolders {
  /** This controller's id (as the registry names holders). */
  readonly selfId: string;
  /** Whether this controller's gateway holds the node's stream now. */
  connectedHere(nodeId: string): boolean;
  /** The controller the node-session registry names for the node, or null when none; rejects when the registry cannot be read. */
  holderOf(nodeId: string): Promise<string | null>;
  /** The page the controller `controllerId` holds for the node; rejects with an {@link ApiError} (503 or 502). */
  readRemote(controllerId: string, nodeId: string, query: LogQuery): Promise<NodeLogRead>;
}

export interface ClusterNodeLogsOptions {
  local: NodeLogBuffers;
  /** Null with a single controller: every read is local and tails do not poll. */
  holders: NodeLogHolders | null;
  clock: Clock;
  pollIntervalMs?: number;
}

/** See the module comment. */
export class ClusterNodeLogs {
  private readonly pollIntervalMs: number;

  constructor(private readonly options: ClusterNodeLogsOptions) {
    this.pollIntervalMs = options.pollIntervalMs ?? NODE_LOG_POLL_INTERVAL_MS;
  }

  /** Reads the node's records through `query` where they are. */
  async read(nodeId: string, query: LogQuery): Promise<NodeLogRead> {
    const holder = await this.remoteHolder(nodeId);
    return holder === null ? this.options.local.read(nodeId, query) : this.options.holders!.readRemote(holder, nodeId, query);
  }

  /** The node's records for a tail filtered by `query` (level and logger narrow what polls carry). */
  source(nodeId: string, query: LogQuery): LogSource {
    // The newest record number read or delivered; null until the replay was read.
    let cursor: number | null = null;
    return {
      read: async (replayQuery) => {
        const page = await this.read(nodeId, replayQuery);
        cursor = Math.max(cursor ?? 0, page.lastSeq);
        return page;
      },
      follow: (listener) => {
        // The first record the local tail delivered while a poll's read was on its way.
        let firstLocalSeq: number | null = null;
        const stopTail = this.options.local.tail(nodeId, (record) => {
          firstLocalSeq ??= record.seq;
          cursor = record.seq;
          listener(record);
        });
        const holders = this.options.holders;
        if (!holders) return stopTail;
        let stopped = false;
        let timer: Timer | null = null;
        const poll = async (): Promise<void> => {
          try {
            // Records of a stream held here arrive through the tail above.
            if (cursor === null || holders.connectedHere(nodeId)) return;
            const holder = await this.remoteHolder(nodeId);
            if (holder === null || stopped) return;
            const from = cursor;
            firstLocalSeq = null;
            const page = await holders.readRemote(holder, nodeId, { level: query.level, logger: query.logger, afterSeq: from });
            if (stopped) return;
            if (firstLocalSeq !== null) {
              // The daemon moved here while the read was on its way and the local tail went on from
              // there: only what the old holder got before the move is new to the tail.
              const gapEnd = firstLocalSeq;
              for (const record of page.records) if (record.seq > from && record.seq < gapEnd) listener(record);
              return;
            }
            if (page.size > 0 && page.lastSeq < from) {
              // The daemon restarted and numbers from 1 again: the next poll reads its buffer from the start.
              cursor = 0;
              return;
            }
            for (const record of page.records) listener(record);
            cursor = Math.max(from, page.lastSeq);
          } catch {
            // The holder cannot be asked (it died, or the registry is unreachable): the next poll
            // looks the holder up again, and a daemon that reconnected elsewhere is found there.
          } finally {
            if (!stopped) timer = this.options.clock.setTimeout(() => void poll(), this.pollIntervalMs, { unref: true });
          }
        };
        timer = this.options.clock.setTimeout(() => void poll(), this.pollIntervalMs, { unref: true });
        return () => {
          stopped = true;
          timer?.cancel();
          stopTail();
        };
      },
    };
  }

  /** The other controller holding the node's stream, or null when its records are read here. */
  private async remoteHolder(nodeId: string): Promise<string | null> {
    const holders = this.options.holders;
    if (!holders || holders.connectedHere(nodeId)) return null;
    let holder: string | null;
    try {
      holder = await holders.holderOf(nodeId);
    } catch (err) {
      throw new ApiError(
        503,
        "LOG_HOLDER_UNAVAILABLE",
        `The node-session registry cannot be read to find the log of node ${nodeId}: ${(err as Error).message}`,
      );
    }
    return holder === null || holder === holders.selfId ? null : holder;
  }
}

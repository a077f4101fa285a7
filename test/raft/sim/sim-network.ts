/**
 * The simulated network between Raft nodes: every message may be dropped, delayed, reordered (a
 * long delay overtakes later messages) or duplicated, and directed links may be cut (partitions,
 * including one-way ones). All choices come from the seeded generator.
 */
import { MessageType, type Message, type NodeId } from "../../../raft/types.js";
import type { EventQueue } from "./event-queue.js";
import type { Prng } from "./prng.js";

export interface NetworkFaults {
  /** Probability that a message is lost. */
  dropRate: number;
  /** Probability that a message is delivered twice. */
  duplicateRate: number;
  /** Probability that a message takes the long path (and so is reordered). */
  longDelayRate: number;
  delayMinMs: number;
  delayMaxMs: number;
  longDelayMaxMs: number;
}

export const calmNetwork: NetworkFaults = {
  dropRate: 0,
  duplicateRate: 0,
  longDelayRate: 0,
  delayMinMs: 1,
  delayMaxMs: 3,
  longDelayMaxMs: 3,
};

export interface NetworkEndpoints {
  /** Hands a message to its destination; false when the destination is down. */
  deliver(message: Message): boolean;
  /** Tells the sender whether a snapshot message arrived (a real transport learns it from the stream). */
  reportSnapshot(message: Message, delivered: boolean): void;
  /** Tells the sender its peer could not be reached (connection refused or cut). */
  reportUnreachable(from: NodeId, to: NodeId): void;
}

export interface NetworkStats {
  sent: number;
  delivered: number;
  dropped: number;
  duplicated: number;
}

export class SimNetwork {
  faults: NetworkFaults = calmNetwork;
  readonly stats: NetworkStats = { sent: 0, delivered: 0, dropped: 0, duplicated: 0 };
  private readonly cutLinks = new Set<string>();

  constructor(
    private readonly queue: EventQueue,
    private readonly prng: Prng,
    private readonly nowMs: () => number,
    private readonly endpoints: NetworkEndpoints,
  ) {}

  cut(from: NodeId, to: NodeId): void {
    this.cutLinks.add(`${from}>${to}`);
  }

  isCut(from: NodeId, to: NodeId): boolean {
    return this.cutLinks.size > 0 && this.cutLinks.has(`${from}>${to}`);
  }

  healAll(): void {
    this.cutLinks.clear();
  }

  describeCuts(): string {
    return [...this.cutLinks].sort().join(" ") || "none";
  }

  send(message: Message): void {
    this.stats.sent++;
    const copies = this.prng.chance(this.faults.duplicateRate) ? 2 : 1;
    if (copies === 2) this.stats.duplicated++;
    for (let copy = 0; copy < copies; copy++) {
      if (this.prng.chance(this.faults.dropRate)) {
        this.stats.dropped++;
        if (message.type === MessageType.Snap) this.endpoints.reportSnapshot(message, false);
        continue;
      }
      this.queue.schedule(this.nowMs() + this.pickDelayMs(), () => this.arrive(message));
    }
  }

  private arrive(message: Message): void {
    const cut = this.isCut(message.from, message.to);
    const delivered = !cut && this.endpoints.deliver(message);
    if (delivered) this.stats.delivered++;
    else {
      this.stats.dropped++;
      this.endpoints.reportUnreachable(message.from, message.to);
    }
    if (message.type === MessageType.Snap) this.endpoints.reportSnapshot(message, delivered);
  }

  private pickDelayMs(): number {
    const f = this.faults;
    if (this.prng.chance(f.longDelayRate)) return this.prng.between(f.delayMaxMs, f.longDelayMaxMs);
    return this.prng.between(f.delayMinMs, f.delayMaxMs);
  }
}

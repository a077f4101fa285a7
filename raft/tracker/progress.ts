/**
 * What the leader knows of one follower's log, and how it is sending to it:
 * - probe: one append at a time until the follower's position is found;
 * - replicate: streaming optimistically, bounded by {@link Inflights};
 * - snapshot: waiting for a snapshot to be installed; no appends.
 */
import { Inflights } from "./inflights.js";

/** How the leader is currently sending to a follower. */
export type ProgressState = "probe" | "replicate" | "snapshot";

/** The leader's record of one follower: match, next, flow state. */
export class Progress {
  /** Highest index known to match the leader's log. */
  match: number;
  /** Next index to send. */
  next: number;
  state: ProgressState = "probe";
  /** Index of the snapshot being sent, in snapshot state. */
  pendingSnapshot = 0;
  /** Election timeouts passed in snapshot state without a report or an acknowledgement. */
  snapshotWaitElections = 0;
  /** Heard from within the current election timeout (for check-quorum). */
  recentActive = false;
  /** In probe state: a probe is out, wait for an answer (or a heartbeat response) before the next. */
  probeSent = false;
  isLearner: boolean;
  readonly inflights: Inflights;

  constructor(fields: { match: number; next: number; isLearner: boolean; inflightMsgsMax: number; recentActive?: boolean }) {
    this.match = fields.match;
    this.next = fields.next;
    this.isLearner = fields.isLearner;
    this.recentActive = fields.recentActive ?? false;
    this.inflights = new Inflights(fields.inflightMsgsMax);
  }

  /** A copy with fresh flow state, used when a configuration change produces a new tracker. */
  clone(): Progress {
    const copy = new Progress({
      match: this.match,
      next: this.next,
      isLearner: this.isLearner,
      inflightMsgsMax: this.inflights.capacityMsgs,
      recentActive: this.recentActive,
    });
    copy.state = this.state;
    copy.pendingSnapshot = this.pendingSnapshot;
    copy.probeSent = this.probeSent;
    return copy;
  }

  private resetState(state: ProgressState): void {
    this.probeSent = false;
    this.pendingSnapshot = 0;
    this.snapshotWaitElections = 0;
    this.state = state;
    this.inflights.reset();
  }

  becomeProbe(): void {
    if (this.state === "snapshot") {
      const pending = this.pendingSnapshot;
      this.resetState("probe");
      this.next = Math.max(this.match + 1, pending + 1);
    } else {
      this.resetState("probe");
      this.next = this.match + 1;
    }
  }

  becomeReplicate(): void {
    this.resetState("replicate");
    this.next = this.match + 1;
  }

  becomeSnapshot(snapshotIndex: number): void {
    this.resetState("snapshot");
    this.pendingSnapshot = snapshotIndex;
  }

  /** Records an acknowledgement of `index`; false when it is stale (never moves match back). */
  maybeUpdate(index: number): boolean {
    let updated = false;
    if (this.match < index) {
      this.match = index;
      updated = true;
      this.probeSent = false;
    }
    this.next = Math.max(this.next, index + 1);
    return updated;
  }

  /** After sending entries up to `index` in replicate state. */
  optimisticUpdate(index: number): void {
    this.next = index + 1;
  }

  /**
   * Handles a rejection of the append at `rejected`; `matchHint` is where the follower's log may
   * match. Returns false when the rejection is stale.
   */
  maybeDecrTo(rejected: number, matchHint: number): boolean {
    if (this.state === "replicate") {
      if (rejected <= this.match) return false;
      this.next = this.match + 1;
      return true;
    }
    if (this.next - 1 !== rejected) return false;
    this.next = Math.max(Math.min(rejected, matchHint + 1), this.match + 1);
    this.probeSent = false;
    return true;
  }

  isPaused(): boolean {
    switch (this.state) {
      case "probe":
        return this.probeSent;
      case "replicate":
        return this.inflights.full();
      case "snapshot":
        return true;
    }
  }
}

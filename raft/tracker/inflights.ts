/**
 * The append messages in flight to one follower, bounded by count: once full, the leader stops
 * sending until acknowledgements free slots, so a slow follower cannot make it buffer without end.
 */
import { assert } from "../errors.js";

/** A ring buffer of the last indexes of appends in flight to one follower. */
export class Inflights {
  /** Last entry index of each message in flight, oldest first. */
  private readonly buffer: number[];
  private start = 0;
  private count = 0;

  constructor(readonly capacityMsgs: number) {
    assert(capacityMsgs > 0, "inflight capacity must be positive");
    this.buffer = new Array<number>(capacityMsgs).fill(0);
  }

  get size(): number {
    return this.count;
  }

  full(): boolean {
    return this.count === this.capacityMsgs;
  }

  add(lastIndex: number): void {
    assert(!this.full(), "cannot add into a full inflights");
    this.buffer[(this.start + this.count) % this.capacityMsgs] = lastIndex;
    this.count++;
  }

  /** Frees every message whose last index is at or below `index`. */
  freeLE(index: number): void {
    while (this.count > 0 && this.buffer[this.start] <= index) {
      this.start = (this.start + 1) % this.capacityMsgs;
      this.count--;
    }
    if (this.count === 0) this.start = 0;
  }

  freeFirstOne(): void {
    if (this.count === 0) return;
    this.freeLE(this.buffer[this.start]);
  }

  reset(): void {
    this.start = 0;
    this.count = 0;
  }
}

/**
 * The part of the log not yet handed to storage: an incoming snapshot and entries after it. Once
 * the host persisted a Ready, `stableTo` / `stableSnapTo` drop what storage now holds.
 */
import { assert } from "./errors.js";
import type { Entry, Snapshot } from "./types.js";

/** Entries (and a snapshot) received or proposed but not yet persisted by the host. */
export class UnstableLog {
  snapshot: Snapshot | null = null;
  entries: Entry[] = [];
  /** Index of `entries[0]` (or where the next entry would go). */
  offset: number;

  constructor(offset: number) {
    this.offset = offset;
  }

  maybeFirstIndex(): number | null {
    return this.snapshot === null ? null : this.snapshot.metadata.index + 1;
  }

  maybeLastIndex(): number | null {
    if (this.entries.length > 0) return this.offset + this.entries.length - 1;
    return this.snapshot === null ? null : this.snapshot.metadata.index;
  }

  maybeTerm(index: number): number | null {
    if (index < this.offset) {
      if (this.snapshot !== null && this.snapshot.metadata.index === index) return this.snapshot.metadata.term;
      return null;
    }
    const last = this.maybeLastIndex();
    if (last === null || index > last) return null;
    return this.entries[index - this.offset].term;
  }

  /** Storage now holds entries up to `index` (written at `term`): drop them. */
  stableTo(index: number, term: number): void {
    const t = this.maybeTerm(index);
    if (t === null || index < this.offset) return;
    // A newer leader may have replaced the entry meanwhile; then it is not stable yet.
    if (t !== term) return;
    this.entries = this.entries.slice(index + 1 - this.offset);
    this.offset = index + 1;
  }

  stableSnapTo(index: number): void {
    if (this.snapshot !== null && this.snapshot.metadata.index === index) this.snapshot = null;
  }

  restore(snapshot: Snapshot): void {
    this.offset = snapshot.metadata.index + 1;
    this.entries = [];
    this.snapshot = snapshot;
  }

  truncateAndAppend(entries: readonly Entry[]): void {
    const after = entries[0].index;
    if (after === this.offset + this.entries.length) {
      for (const e of entries) this.entries.push(e);
    } else if (after <= this.offset) {
      this.offset = after;
      this.entries = entries.slice();
    } else {
      this.entries = this.slice(this.offset, after).concat(entries);
    }
  }

  slice(lo: number, hi: number): Entry[] {
    assert(lo <= hi, () => `unstable slice lo ${lo} > hi ${hi}`);
    const upper = this.offset + this.entries.length;
    assert(lo >= this.offset && hi <= upper, () => `unstable slice [${lo},${hi}) out of bound [${this.offset},${upper}]`);
    return this.entries.slice(lo - this.offset, hi - this.offset);
  }
}

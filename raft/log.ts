/**
 * The Raft log as the core sees it: what storage holds followed by what is still unstable, plus
 * the commit and applied cursors. Reads fall through from unstable to storage.
 */
import { ErrCompacted, RaftErrorCode, assert, hasErrorCode } from "./errors.js";
import { UnstableLog } from "./log-unstable.js";
import type { Entry, Snapshot, Storage } from "./types.js";
import { limitSize } from "./util.js";

/** The log seen through unstable then storage, with the commit and applied cursors. */
export class RaftLog {
  readonly storage: Storage;
  readonly unstable: UnstableLog;
  /** Highest index known to be stored on a quorum. */
  committed: number;
  /** Highest index the host reported applied. Always `applied <= committed`. */
  applied: number;
  readonly maxCommittedSizePerReadyBytes: number;

  constructor(storage: Storage, maxCommittedSizePerReadyBytes: number) {
    this.storage = storage;
    this.maxCommittedSizePerReadyBytes = maxCommittedSizePerReadyBytes;
    const first = storage.firstIndex();
    const last = storage.lastIndex();
    this.unstable = new UnstableLog(last + 1);
    this.committed = first - 1;
    this.applied = first - 1;
  }

  firstIndex(): number {
    return this.unstable.maybeFirstIndex() ?? this.storage.firstIndex();
  }

  lastIndex(): number {
    return this.unstable.maybeLastIndex() ?? this.storage.lastIndex();
  }

  lastTerm(): number {
    return this.term(this.lastIndex());
  }

  /** The term at `index`; 0 when outside the log. Throws COMPACTED/UNAVAILABLE from storage. */
  term(index: number): number {
    const dummy = this.firstIndex() - 1;
    if (index < dummy || index > this.lastIndex()) return 0;
    const unstable = this.unstable.maybeTerm(index);
    if (unstable !== null) return unstable;
    return this.storage.term(index);
  }

  /** The term at `index`, or null when it is compacted or unavailable. */
  termOrNull(index: number): number | null {
    try {
      return this.term(index);
    } catch (error) {
      if (hasErrorCode(error, RaftErrorCode.Compacted) || hasErrorCode(error, RaftErrorCode.Unavailable)) return null;
      throw error;
    }
  }

  matchTerm(index: number, term: number): boolean {
    return this.termOrNull(index) === term;
  }

  /**
   * Appends a leader's entries that follow (index, logTerm), if our log matches there. Returns the
   * index of the last new entry, or null on a mismatch.
   */
  maybeAppend(index: number, logTerm: number, committed: number, entries: readonly Entry[]): number | null {
    if (!this.matchTerm(index, logTerm)) return null;
    const lastNew = index + entries.length;
    const conflict = this.findConflict(entries);
    if (conflict !== 0) {
      assert(conflict > this.committed, () => `entry ${conflict} conflicts with committed entry (committed ${this.committed})`);
      this.append(entries.slice(conflict - (index + 1)));
    }
    this.commitTo(Math.min(committed, lastNew));
    return lastNew;
  }

  append(entries: readonly Entry[]): number {
    if (entries.length === 0) return this.lastIndex();
    const after = entries[0].index - 1;
    assert(after >= this.committed, () => `appending after ${after} is below committed ${this.committed}`);
    this.unstable.truncateAndAppend(entries);
    return this.lastIndex();
  }

  /** Index of the first entry whose term differs from ours (or that we lack); 0 when none. */
  findConflict(entries: readonly Entry[]): number {
    for (const e of entries) if (!this.matchTerm(e.index, e.term)) return e.index;
    return 0;
  }

  /**
   * The largest index at or below `index` whose term is at most `term`: where a leader (or a
   * follower answering a rejected append) may resume probing, skipping a whole term at a time.
   */
  findConflictByTerm(index: number, term: number): { index: number; term: number } {
    let i = Math.min(index, this.lastIndex());
    for (;;) {
      const ours = this.termOrNull(i);
      if (ours === null) return { index: i, term: 0 };
      if (ours <= term) return { index: i, term: ours };
      i--;
    }
  }

  unstableEntries(): Entry[] {
    return this.unstable.entries.slice();
  }

  /** Committed entries not yet applied, bounded by `maxCommittedSizePerReadyBytes`. */
  nextEntries(): Entry[] {
    const lo = Math.max(this.applied + 1, this.firstIndex());
    if (this.committed + 1 <= lo) return [];
    return this.slice(lo, this.committed + 1, this.maxCommittedSizePerReadyBytes);
  }

  hasNextEntries(): boolean {
    return this.committed + 1 > Math.max(this.applied + 1, this.firstIndex());
  }

  hasPendingSnapshot(): boolean {
    return this.unstable.snapshot !== null;
  }

  snapshot(): Snapshot {
    return this.unstable.snapshot ?? this.storage.snapshot();
  }

  commitTo(index: number): void {
    if (this.committed >= index) return;
    assert(index <= this.lastIndex(), () => `commit ${index} is out of range [last index ${this.lastIndex()}]`);
    this.committed = index;
  }

  appliedTo(index: number): void {
    if (index === 0) return;
    assert(
      index <= this.committed && index >= this.applied,
      () => `applied ${index} is out of range [prev applied ${this.applied}, committed ${this.committed}]`,
    );
    this.applied = index;
  }

  stableTo(index: number, term: number): void {
    this.unstable.stableTo(index, term);
  }

  stableSnapTo(index: number): void {
    this.unstable.stableSnapTo(index);
  }

  /** Entries from `index` on, at most `maxSizeBytes` (but at least one). */
  entries(index: number, maxSizeBytes: number): Entry[] {
    if (index > this.lastIndex()) return [];
    return this.slice(index, this.lastIndex() + 1, maxSizeBytes);
  }

  /** True when a log ending at (lastIndex, term) is at least as up to date as ours (§5.4.1). */
  isUpToDate(lastIndex: number, term: number): boolean {
    const ourTerm = this.lastTerm();
    return term > ourTerm || (term === ourTerm && lastIndex >= this.lastIndex());
  }

  /** Advances commit to `maxIndex` only if that entry is from `term` (§5.4.2, Figure 8). */
  maybeCommit(maxIndex: number, term: number): boolean {
    if (maxIndex > this.committed && this.termOrNull(maxIndex) === term) {
      this.commitTo(maxIndex);
      return true;
    }
    return false;
  }

  restore(snapshot: Snapshot): void {
    this.committed = snapshot.metadata.index;
    this.unstable.restore(snapshot);
  }

  /** Entries in [lo, hi), at most `maxSizeBytes`; throws COMPACTED when lo is before the log. */
  slice(lo: number, hi: number, maxSizeBytes: number): Entry[] {
    assert(lo <= hi, () => `invalid slice ${lo} > ${hi}`);
    const first = this.firstIndex();
    if (lo < first) throw new ErrCompacted(lo);
    const upper = this.lastIndex() + 1;
    assert(hi <= upper, () => `slice [${lo},${hi}) out of bound [${first},${upper}]`);
    if (lo === hi) return [];
    let out: Entry[] = [];
    if (lo < this.unstable.offset) {
      const stored = this.storage.entries(lo, Math.min(hi, this.unstable.offset), maxSizeBytes);
      // Storage returned fewer than asked: the size limit cut it, so stop here.
      if (stored.length < Math.min(hi, this.unstable.offset) - lo) return stored;
      out = stored;
    }
    if (hi > this.unstable.offset) {
      const fresh = this.unstable.slice(Math.max(lo, this.unstable.offset), hi);
      out = out.length > 0 ? out.concat(fresh) : fresh;
    }
    return limitSize(out, maxSizeBytes);
  }
}

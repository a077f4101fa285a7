/**
 * An in-memory {@link Storage}, for tests and for single-process use. Like every storage, it holds
 * a placeholder entry at the snapshot index (`entries[0]`), so the term at the compaction point
 * stays answerable after compaction.
 */
import { ErrCompacted, ErrSnapOutOfDate, ErrUnavailable, assert } from "./errors.js";
import type { ConfState, Entry, HardState, Snapshot, Storage } from "./types.js";
import { EMPTY_BYTES, EMPTY_CONF_STATE, EMPTY_HARD_STATE, limitSize, makeEntry } from "./util.js";

/**
 * Memory-backed Raft storage. The host appends what each Ready carried with {@link append},
 * {@link setHardState} and {@link applySnapshot}; the core reads through the {@link Storage}
 * methods. {@link createSnapshot} and {@link compact} implement log compaction. A brand-new
 * node is given its first configuration through the constructor's `initialConfState`.
 */
export class MemoryStorage implements Storage {
  private hardState: HardState = EMPTY_HARD_STATE;
  private snap: Snapshot;
  /** `ents[0]` is a placeholder at the snapshot index; real entries follow. */
  private ents: Entry[];

  constructor(initialConfState: ConfState = EMPTY_CONF_STATE) {
    this.snap = { metadata: { index: 0, term: 0, confState: initialConfState }, data: EMPTY_BYTES };
    this.ents = [makeEntry(0, 0)];
  }

  initialState(): { hardState: HardState; confState: ConfState } {
    return { hardState: this.hardState, confState: this.snap.metadata.confState };
  }

  setHardState(hardState: HardState): void {
    this.hardState = hardState;
  }

  entries(lo: number, hi: number, maxSizeBytes: number): Entry[] {
    const offset = this.ents[0].index;
    if (lo <= offset) throw new ErrCompacted(lo);
    assert(hi <= this.lastIndex() + 1, () => `entries hi ${hi} is out of bound (last index ${this.lastIndex()})`);
    assert(lo <= hi, () => `entries lo ${lo} > hi ${hi}`);
    if (this.ents.length === 1) throw new ErrUnavailable(lo);
    return limitSize(this.ents.slice(lo - offset, hi - offset), maxSizeBytes);
  }

  term(index: number): number {
    const offset = this.ents[0].index;
    if (index < offset) throw new ErrCompacted(index);
    if (index - offset >= this.ents.length) throw new ErrUnavailable(index);
    return this.ents[index - offset].term;
  }

  firstIndex(): number {
    return this.ents[0].index + 1;
  }

  lastIndex(): number {
    return this.ents[0].index + this.ents.length - 1;
  }

  snapshot(): Snapshot {
    return this.snap;
  }

  /** Replaces the whole content with a snapshot received from the leader. */
  applySnapshot(snapshot: Snapshot): void {
    if (snapshot.metadata.index <= this.snap.metadata.index) throw new ErrSnapOutOfDate(snapshot.metadata.index);
    this.snap = snapshot;
    this.ents = [makeEntry(snapshot.metadata.term, snapshot.metadata.index)];
  }

  /**
   * Records a snapshot of the state machine at `index` (which must be in the log) so that
   * followers behind a later compaction can be sent it. Returns the snapshot.
   */
  createSnapshot(index: number, confState: ConfState, data: Uint8Array): Snapshot {
    if (index <= this.snap.metadata.index) throw new ErrSnapOutOfDate(index);
    assert(index <= this.lastIndex(), () => `snapshot index ${index} is beyond last index ${this.lastIndex()}`);
    const offset = this.ents[0].index;
    this.snap = { metadata: { index, term: this.ents[index - offset].term, confState }, data };
    return this.snap;
  }

  /** Discards every entry before `compactIndex`; the entry at `compactIndex` becomes the placeholder. */
  compact(compactIndex: number): void {
    const offset = this.ents[0].index;
    if (compactIndex <= offset) throw new ErrCompacted(compactIndex);
    assert(compactIndex <= this.lastIndex(), () => `compact ${compactIndex} is beyond last index ${this.lastIndex()}`);
    const kept = this.ents.slice(compactIndex - offset);
    const head = kept[0];
    kept[0] = makeEntry(head.term, head.index);
    this.ents = kept;
  }

  /**
   * Appends entries (which must be contiguous), replacing any existing suffix they conflict with.
   * Entries at or before the compaction point are ignored.
   */
  append(entries: readonly Entry[]): void {
    if (entries.length === 0) return;
    for (let i = 1; i < entries.length; i++) {
      assert(entries[i].index === entries[i - 1].index + 1, () => `appended entries are not contiguous at ${entries[i].index}`);
    }
    const first = this.firstIndex();
    const last = entries[entries.length - 1].index;
    if (last < first) return;
    const fresh = first > entries[0].index ? entries.slice(first - entries[0].index) : entries;
    const offset = fresh[0].index - this.ents[0].index;
    assert(offset <= this.ents.length, () => `missing log entry [last: ${this.lastIndex()}, append at: ${fresh[0].index}]`);
    if (offset === this.ents.length) {
      // The common case: a plain extension, without copying the log.
      for (const e of fresh) this.ents.push(e);
      return;
    }
    this.ents = this.ents.slice(0, offset).concat(fresh);
  }
}

/**
 * The durable Raft log on LevelDB. The core reads through the synchronous {@link Storage} view,
 * so the whole log tail after the last compaction is mirrored in memory; every write goes to
 * LevelDB first with `sync: true` (level does not fsync unless told) and the in-memory mirror is
 * updated only once the write is durable. {@link LevelStorage.persist} writes everything one Ready
 * carries — hard state, snapshot and entries — in one atomic batch, so one Ready costs at most one
 * fsync. A Ready that only moves the commit index writes nothing: the latest hard state travels
 * with the next write (entries, a term or vote, a snapshot), and a commit index lost in a crash is
 * learnt again from the leader.
 *
 * Layout (keys are UTF-8, values bytes):
 *   `hard-state`       JSON {@link HardState}
 *   `snapshot`         the latest snapshot: 4-byte metadata length, JSON metadata, data
 *   `log-start`        JSON {index, term} of the entry just before the first stored one
 *   `entry/<index>`    one entry, index zero-padded to 16 digits so keys sort numerically
 */
import { Level } from "level";
import type { ConfState, Entry, EntryType, HardState, Snapshot, SnapshotMetadata, Storage } from "../../../raft/types.js";
import { assert } from "../../shared/errors.js";
import { ErrCompacted, ErrSnapOutOfDate, ErrUnavailable } from "../../../raft/errors.js";
import { limitSize } from "../../../raft/util.js";

const hardStateKey = "hard-state";
const snapshotKey = "snapshot";
const logStartKey = "log-start";
const entryKeyPrefix = "entry/";
const entryKeyDigits = 16;
const entryHeaderBytes = 1 + 8 + 8;

const emptyHardState: HardState = { term: 0, vote: null, commit: 0 };
const emptyConfState: ConfState = { voters: [], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false };

/** What one Ready asks to be made durable; a subset of the Ready itself. */
export interface PersistRequest {
  readonly hardState: HardState | null;
  readonly entries: readonly Entry[];
  readonly snapshot: Snapshot | null;
  /**
   * False when only the commit index changed: nothing is written then; the hard state goes out
   * with the next write (a lost commit index is re-learned from the leader). Defaults to true.
   */
  readonly mustSync?: boolean;
}

type BatchOp = { type: "put"; key: string; value: Uint8Array } | { type: "del"; key: string };

/** LevelDB-backed Raft {@link Storage}. Open with {@link LevelStorage.open}; one instance per directory. */
export class LevelStorage implements Storage {
  /** `log[0]` is a placeholder for the entry just before the first stored one (the compaction point). */
  private log: Entry[];
  private hardState: HardState;
  private latestSnapshot: Snapshot;
  /** Writes are chained so they reach LevelDB in the order they were requested. */
  private writeChain: Promise<void> = Promise.resolve();
  /** Writes requested and not settled yet; with none, a write goes to LevelDB at once. */
  private writesPending = 0;
  private closed = false;
  /** The in-memory hard state moved (only its commit index) since it was last written. */
  private hardStateUnwritten = false;

  private constructor(
    private readonly db: Level<string, Uint8Array>,
    hardState: HardState,
    snapshot: Snapshot,
    log: Entry[],
  ) {
    this.hardState = hardState;
    this.latestSnapshot = snapshot;
    this.log = log;
  }

  /** Opens (creating if absent) the log in `dir` and loads hard state, snapshot and log tail. */
  static async open(dir: string): Promise<LevelStorage> {
    const db = new Level<string, Uint8Array>(dir, { keyEncoding: "utf8", valueEncoding: "view" });
    await db.open();
    const hardStateBytes = await db.get(hardStateKey);
    const snapshotBytes = await db.get(snapshotKey);
    const logStartBytes = await db.get(logStartKey);
    const hardState = hardStateBytes ? (JSON.parse(textDecoder.decode(hardStateBytes)) as HardState) : emptyHardState;
    const snapshot = snapshotBytes ? decodeSnapshot(snapshotBytes) : { metadata: { index: 0, term: 0, confState: emptyConfState }, data: new Uint8Array(0) };
    const logStart = logStartBytes ? (JSON.parse(textDecoder.decode(logStartBytes)) as { index: number; term: number }) : { index: 0, term: 0 };
    const log: Entry[] = [placeholder(logStart.index, logStart.term)];
    for await (const [key, value] of db.iterator({ gt: entryKey(logStart.index), lt: entryKeyPrefix + "~" })) {
      const entry = decodeEntry(value);
      assert(key === entryKey(entry.index), `entry stored under ${key} claims index ${entry.index}`);
      assert(entry.index === log[log.length - 1]!.index + 1, `log gap before index ${entry.index}`);
      log.push(entry);
    }
    return new LevelStorage(db, hardState, snapshot, log);
  }

  /**
   * Gives a brand-new node its first configuration: the snapshot at index 0 carries `confState`.
   * Does nothing when the storage already holds state (a restart).
   */
  async bootstrap(confState: ConfState): Promise<void> {
    if (this.hardState.term !== 0 || this.lastIndex() !== 0 || this.latestSnapshot.metadata.confState.voters.length > 0) return;
    const snapshot: Snapshot = { metadata: { index: 0, term: 0, confState }, data: new Uint8Array(0) };
    await this.write([{ type: "put", key: snapshotKey, value: encodeSnapshot(snapshot) }]);
    this.latestSnapshot = snapshot;
  }

  initialState(): { hardState: HardState; confState: ConfState } {
    return { hardState: this.hardState, confState: this.latestSnapshot.metadata.confState };
  }

  entries(lo: number, hi: number, maxSizeBytes: number): Entry[] {
    const offset = this.log[0]!.index;
    if (lo <= offset) throw new ErrCompacted(lo);
    if (hi > this.lastIndex() + 1) throw new ErrUnavailable(hi - 1);
    return limitSize(this.log.slice(lo - offset, hi - offset), maxSizeBytes);
  }

  term(index: number): number {
    const offset = this.log[0]!.index;
    if (index < offset) throw new ErrCompacted(index);
    if (index - offset >= this.log.length) throw new ErrUnavailable(index);
    return this.log[index - offset]!.term;
  }

  firstIndex(): number {
    return this.log[0]!.index + 1;
  }

  lastIndex(): number {
    return this.log[0]!.index + this.log.length - 1;
  }

  snapshot(): Snapshot {
    return this.latestSnapshot;
  }

  /** Current hard state (as last persisted). */
  currentHardState(): HardState {
    return this.hardState;
  }

  /**
   * Makes what one Ready carries durable in a single atomic, fsynced batch: snapshot first (it
   * replaces the log), then entries, then hard state. When the request says no sync is needed
   * (only the commit index changed) nothing is written: the next batch, snapshot or `close()`
   * carries the hard state.
   */
  async persist(request: PersistRequest): Promise<void> {
    const ops: BatchOp[] = [];
    let log = this.log;
    let snapshot = this.latestSnapshot;
    if (request.snapshot && request.snapshot.metadata.index > 0) {
      ({ log, snapshot } = this.planSnapshot(request.snapshot, ops));
    }
    const append = request.entries.length > 0 ? this.planAppend(log, request.entries, ops) : null;
    const hardState = request.hardState ?? this.hardState;
    if (request.mustSync === false && ops.length === 0) {
      // Only the commit index moved: written with the next batch.
      this.hardState = hardState;
      this.hardStateUnwritten = this.hardStateUnwritten || request.hardState !== null;
      return;
    }
    if (request.hardState || this.hardStateUnwritten) ops.push(this.hardStateOp(hardState));
    if (ops.length === 0) return;
    await this.write(ops, request.mustSync ?? true);
    if (append) {
      // In place: copying the whole tail (up to a snapshot interval of entries) on every write
      // cost more than the rest of the write's preparation, and as much again in garbage.
      log.length = append.keep;
      for (const entry of append.entries) log.push(entry);
    }
    this.log = log;
    this.latestSnapshot = snapshot;
    this.hardState = hardState;
    this.hardStateUnwritten = false;
  }

  /** Appends entries, replacing any conflicting tail (entries already compacted are skipped). */
  async append(entries: readonly Entry[]): Promise<void> {
    await this.persist({ hardState: null, entries, snapshot: null });
  }

  async setHardState(hardState: HardState): Promise<void> {
    await this.persist({ hardState, entries: [], snapshot: null });
  }

  /** Replaces the whole log with a snapshot received from the leader. */
  async applySnapshot(snapshot: Snapshot): Promise<void> {
    if (snapshot.metadata.index <= this.latestSnapshot.metadata.index) throw new ErrSnapOutOfDate(snapshot.metadata.index);
    await this.persist({ hardState: null, entries: [], snapshot });
  }

  /**
   * Records a snapshot of the state machine as of `index` (which must be in the log and newer than
   * the current snapshot). The log is not compacted; call {@link compact} for that.
   */
  async createSnapshot(index: number, confState: ConfState, data: Uint8Array): Promise<Snapshot> {
    if (index <= this.latestSnapshot.metadata.index) throw new ErrSnapOutOfDate(index);
    assert(index <= this.lastIndex(), `snapshot index ${index} beyond last index ${this.lastIndex()}`);
    const snapshot: Snapshot = { metadata: { index, term: this.term(index), confState }, data };
    // The hard state goes along: its commit index, at or past what was applied, must not fall
    // behind the snapshot on disk.
    const hardState = this.hardState;
    await this.write([{ type: "put", key: snapshotKey, value: encodeSnapshot(snapshot) }, this.hardStateOp(hardState)]);
    this.latestSnapshot = snapshot;
    if (this.hardState === hardState) this.hardStateUnwritten = false;
    return snapshot;
  }

  /** Discards entries up to and including `compactIndex` (which must not be beyond the last index). */
  async compact(compactIndex: number): Promise<void> {
    const offset = this.log[0]!.index;
    if (compactIndex <= offset) throw new ErrCompacted(compactIndex);
    assert(compactIndex <= this.lastIndex(), `compact ${compactIndex} beyond last index ${this.lastIndex()}`);
    const term = this.term(compactIndex);
    await this.write([{ type: "put", key: logStartKey, value: textEncoder.encode(JSON.stringify({ index: compactIndex, term })) }]);
    this.log = [placeholder(compactIndex, term), ...this.log.slice(compactIndex - offset + 1)];
    // From here on the entries up to the compaction point are never read (a reopen starts after
    // `log-start`); LevelDB deletes them in its own thread rather than from a batch of thousands
    // of deletes built on the event loop. A crash before this leaves them for the next compaction.
    await this.clearEntriesThrough(compactIndex);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    // Only the commit index is unwritten, and a restarted member learns it again from the leader:
    // losing it at close is harmless. Earlier writes' failures went to the callers that asked for them.
    if (this.hardStateUnwritten) await this.write([this.hardStateOp(this.hardState)], false).catch(() => undefined);
    this.closed = true;
    await this.writeChain.catch(() => undefined);
    await this.db.close();
  }

  private hardStateOp(hardState: HardState): BatchOp {
    return { type: "put", key: hardStateKey, value: textEncoder.encode(JSON.stringify(hardState)) };
  }

  private planSnapshot(snapshot: Snapshot, ops: BatchOp[]): { log: Entry[]; snapshot: Snapshot } {
    const { index, term } = snapshot.metadata;
    for (let i = this.firstIndex(); i <= this.lastIndex(); i++) ops.push({ type: "del", key: entryKey(i) });
    ops.push({ type: "put", key: snapshotKey, value: encodeSnapshot(snapshot) });
    ops.push({ type: "put", key: logStartKey, value: textEncoder.encode(JSON.stringify({ index, term })) });
    return { log: [placeholder(index, term)], snapshot };
  }

  /** Adds the batch operations of an append; returns how to change `log` once they are durable. */
  private planAppend(log: Entry[], entries: readonly Entry[], ops: BatchOp[]): { keep: number; entries: readonly Entry[] } | null {
    const offset = log[0]!.index;
    const oldLast = offset + log.length - 1;
    const kept = entries[0]!.index > offset ? entries : entries.filter((entry) => entry.index > offset);
    if (kept.length === 0) return null;
    const first = kept[0]!.index;
    assert(first <= oldLast + 1, `append at ${first} leaves a gap after ${oldLast}`);
    kept.forEach((entry, i) => assert(entry.index === first + i, "appended entries are not contiguous"));
    const newLast = kept[kept.length - 1]!.index;
    for (const entry of kept) ops.push({ type: "put", key: entryKey(entry.index), value: encodeEntry(entry) });
    for (let index = newLast + 1; index <= oldLast; index++) ops.push({ type: "del", key: entryKey(index) });
    return { keep: first - offset, entries: kept };
  }

  /** Deletes every stored entry at or below `index`, in order with the other writes. */
  private clearEntriesThrough(index: number): Promise<void> {
    assert(!this.closed, "write to a closed LevelStorage");
    return this.enqueue(() => this.db.clear({ gte: entryKeyPrefix, lte: entryKey(index) }));
  }

  private write(ops: BatchOp[], sync = true): Promise<void> {
    assert(!this.closed, "write to a closed LevelStorage");
    return this.enqueue(() => this.db.batch(ops, { sync }));
  }

  /**
   * Runs `start` after the writes requested before it; at once when there are none, rather than a
   * microtask later: the host applies committed entries right after asking for a write, and the
   * fsync should be under way meanwhile.
   */
  private enqueue(start: () => Promise<void>): Promise<void> {
    const result = this.writesPending === 0 ? start() : this.writeChain.then(start);
    this.writesPending += 1;
    const settled = result.then(
      () => {
        this.writesPending -= 1;
      },
      () => {
        this.writesPending -= 1;
      },
    );
    this.writeChain = settled;
    return result;
  }
}

const textEncoder = new TextEncoder();
const textDecoder = new TextDecoder();

function placeholder(index: number, term: number): Entry {
  return { index, term, type: "normal", data: new Uint8Array(0) };
}

function entryKey(index: number): string {
  return entryKeyPrefix + String(index).padStart(entryKeyDigits, "0");
}

const entryTypeCodes: Record<EntryType, number> = { normal: 0, "conf-change": 1 };
const entryTypesByCode: EntryType[] = ["normal", "conf-change"];

function encodeEntry(entry: Entry): Uint8Array {
  const out = new Uint8Array(entryHeaderBytes + entry.data.byteLength);
  const view = new DataView(out.buffer);
  view.setUint8(0, entryTypeCodes[entry.type]);
  view.setFloat64(1, entry.term);
  view.setFloat64(9, entry.index);
  out.set(entry.data, entryHeaderBytes);
  return out;
}

function decodeEntry(bytes: Uint8Array): Entry {
  assert(bytes.byteLength >= entryHeaderBytes, "stored entry shorter than its header");
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const type = entryTypesByCode[view.getUint8(0)];
  assert(type !== undefined, `unknown stored entry type ${view.getUint8(0)}`);
  return { type, term: view.getFloat64(1), index: view.getFloat64(9), data: bytes.slice(entryHeaderBytes) };
}

function encodeSnapshot(snapshot: Snapshot): Uint8Array {
  const metadata = textEncoder.encode(JSON.stringify(snapshot.metadata));
  const out = new Uint8Array(4 + metadata.byteLength + snapshot.data.byteLength);
  new DataView(out.buffer).setUint32(0, metadata.byteLength);
  out.set(metadata, 4);
  out.set(snapshot.data, 4 + metadata.byteLength);
  return out;
}

function decodeSnapshot(bytes: Uint8Array): Snapshot {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const metadataBytes = view.getUint32(0);
  assert(4 + metadataBytes <= bytes.byteLength, "stored snapshot metadata overruns the value");
  const metadata = JSON.parse(textDecoder.decode(bytes.subarray(4, 4 + metadataBytes))) as SnapshotMetadata;
  return { metadata, data: bytes.slice(4 + metadataBytes) };
}

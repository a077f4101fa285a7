/**
 * A node's disk: writes land in a volatile page cache and become durable only when fsynced. A crash
 * keeps a random prefix of the unsynced writes (each write is one atomic batch, like a LevelDB write
 * batch) and loses the rest.
 */
import type { Entry, HardState, Snapshot } from "../../../raft/types.js";
import type { Prng } from "./prng.js";

export interface DiskBatch {
  readonly hardState: HardState | null;
  readonly entries: readonly Entry[];
  readonly snapshot: Snapshot | null;
}

export interface DurableState {
  readonly hardState: HardState | null;
  readonly snapshot: Snapshot | null;
  /** Log entries after the snapshot index, contiguous. */
  readonly entries: readonly Entry[];
}

export class SimDisk {
  private hardState: HardState | null = null;
  private snapshot: Snapshot | null = null;
  private entries: Entry[] = [];
  private unsynced: DiskBatch[] = [];

  get unsyncedBatches(): number {
    return this.unsynced.length;
  }

  write(batch: DiskBatch): void {
    this.unsynced.push(batch);
  }

  fsync(): void {
    for (const batch of this.unsynced) this.persist(batch);
    this.unsynced = [];
  }

  /** Writes and fsyncs a snapshot taken by the host (which also flushes everything written before). */
  saveSnapshot(snapshot: Snapshot): void {
    this.fsync();
    if (snapshot.metadata.index <= (this.snapshot?.metadata.index ?? 0)) return;
    this.snapshot = snapshot;
    this.entries = this.entries.filter((e) => e.index > snapshot.metadata.index);
  }

  /** The power goes out: a random prefix of the unsynced writes survives. Returns how many were lost. */
  crash(prng: Prng): number {
    const kept = prng.int(this.unsynced.length + 1);
    for (const batch of this.unsynced.slice(0, kept)) this.persist(batch);
    const lost = this.unsynced.length - kept;
    this.unsynced = [];
    return lost;
  }

  read(): DurableState {
    return { hardState: this.hardState, snapshot: this.snapshot, entries: [...this.entries] };
  }

  private persist(batch: DiskBatch): void {
    // A snapshot received from the leader replaces the whole log, as MemoryStorage.applySnapshot does.
    if (batch.snapshot !== null && batch.snapshot.metadata.index > (this.snapshot?.metadata.index ?? 0)) {
      this.snapshot = batch.snapshot;
      this.entries = [];
    }
    if (batch.entries.length > 0) this.appendEntries(batch.entries);
    if (batch.hardState !== null) this.hardState = batch.hardState;
  }

  private appendEntries(entries: readonly Entry[]): void {
    const snapshotIndex = this.snapshot?.metadata.index ?? 0;
    const fresh = entries.filter((e) => e.index > snapshotIndex);
    if (fresh.length === 0) return;
    const first = fresh[0].index;
    const lastKept = this.entries.length === 0 ? snapshotIndex : this.entries[this.entries.length - 1].index;
    if (first > lastKept + 1) throw new Error(`disk log gap: appending at ${first} after ${lastKept}`);
    this.entries = this.entries.filter((e) => e.index < first).concat(fresh);
  }
}

/**
 * Expected failures of a Raft log storage, shared by every implementation in src/cluster/.
 * The core treats "compacted" as "send a snapshot instead" and "unavailable" as "not yet there".
 */
import type { Entry } from "../../raft/types.js";

export class StorageCompactedError extends Error {
  readonly code = "COMPACTED";
  constructor(readonly index: number) {
    super(`log index ${index} is compacted`);
    this.name = "StorageCompactedError";
  }
}

export class StorageUnavailableError extends Error {
  readonly code = "UNAVAILABLE";
  constructor(readonly index: number) {
    super(`log index ${index} is not available yet`);
    this.name = "StorageUnavailableError";
  }
}

export class StorageSnapshotOutOfDateError extends Error {
  readonly code = "SNAPSHOT_OUT_OF_DATE";
  constructor(readonly index: number) {
    super(`snapshot at index ${index} is older than the current one`);
    this.name = "StorageSnapshotOutOfDateError";
  }
}

/** Size of an entry for the `maxSizeBytes` limits: its payload plus a fixed header allowance. */
export function entrySizeBytes(entry: Entry): number {
  return entry.data.byteLength + 24;
}

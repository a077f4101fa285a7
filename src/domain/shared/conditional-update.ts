/**
 * Read-modify-write of one document as a compare-and-set (ARCHITECTURE.md, "A fenced write is
 * conditional"): the document is read with its revision, the caller decides on what it read (and
 * checks whatever guards the write: a scope's lease, a lock's signal), and the write succeeds only
 * if nobody wrote in between. A check followed by a plain write could overwrite a newer version
 * written by whoever took over while the writer stalled between the two; this cannot.
 */
import { DuplicateKeyError, RevisionConflictError, type Collection, type Doc } from "../../store/ports.js";

/**
 * Rounds of read, decide, compare-and-set on one document before giving up: each failed round
 * means another writer got in between, which under a lock or a lease is rare (a stale holder, or
 * an unlocked writer of other fields).
 */
export const UPDATE_ATTEMPTS_MAX = 4;

/** What a caller decided on the version it read. */
export interface UpdateDecision<T extends Doc, R> {
  /** The version to write; null: write nothing. */
  next: T | null;
  result: R;
}

export interface ConditionalUpdateOptions {
  /** Checked right before each write: a lost lock stops the write (its reason is thrown). */
  signal?: AbortSignal;
  attemptsMax?: number;
}

/**
 * Reads `id` with its revision, asks `decide` (which may throw to refuse, or check a guard), and
 * writes its `next` only at the revision read: putIf, or insert when the document did not exist.
 * When the revision moved (or someone inserted first), everything runs again on what is stored
 * now, at most `attemptsMax` times; then the RevisionConflictError is thrown. Answers `result`
 * of the round that wrote (or decided to write nothing).
 */
export async function updateDocument<T extends Doc, R>(
  collection: Pick<Collection<T>, "getRevisioned" | "putIf" | "insert">,
  id: string,
  decide: (current: T | null) => Promise<UpdateDecision<T, R>> | UpdateDecision<T, R>,
  options: ConditionalUpdateOptions = {},
): Promise<R> {
  const attemptsMax = options.attemptsMax ?? UPDATE_ATTEMPTS_MAX;
  for (let attempt = 1; ; attempt++) {
    const stored = await collection.getRevisioned(id);
    const { next, result } = await decide(stored?.doc ?? null);
    if (next === null) return result;
    options.signal?.throwIfAborted();
    try {
      if (stored) await collection.putIf(next, stored.rev);
      else await collection.insert(next);
      return result;
    } catch (error) {
      const raced = error instanceof RevisionConflictError || (error instanceof DuplicateKeyError && !stored && error.key === id);
      if (!raced || attempt >= attemptsMax) throw error;
    }
  }
}

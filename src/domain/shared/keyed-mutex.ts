/**
 * Serializes read-modify-write sequences per key inside one controller: two PATCHes of one group,
 * or two drains of one node, never interleave their read and their write. Keys with no waiter are
 * forgotten, so the map holds at most one entry per key currently in use.
 */
/**
 * A section run under a lock. Its signal aborts when the lock is lost before the section ended (a
 * cluster-wide lock whose lease could not be kept); the section then writes nothing more, and
 * throws the signal's reason (`signal.throwIfAborted()` before each write).
 */
export type LockedSection<T> = (signal: AbortSignal) => Promise<T>;

/** Runs read-modify-write sequences one at a time per key (within a controller, or across the cluster). */
export interface KeyedLock {
  run<T>(key: string, fn: LockedSection<T>): Promise<T>;
}

/** The signal of a lock held in memory: it cannot be lost, so it never aborts. */
const neverLost = new AbortController().signal;

export class KeyedMutex implements KeyedLock {
  private readonly tails = new Map<string, Promise<void>>();

  /** Runs `fn` after every earlier `run` with the same key has settled. */
  async run<T>(key: string, fn: LockedSection<T>): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    let release!: () => void;
    const current = new Promise<void>((resolve) => (release = resolve));
    const tail = previous.then(() => current);
    this.tails.set(key, tail);
    try {
      await previous;
      return await fn(neverLost);
    } finally {
      release();
      if (this.tails.get(key) === tail) this.tails.delete(key);
    }
  }
}

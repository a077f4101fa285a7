/**
 * Coalesces concurrent identical reads: callers asking for the same key while a computation is in
 * flight share its promise instead of starting another. Nothing is kept once the promise settles,
 * so a result is never older than the request that received it.
 */
export class SingleFlight<T> {
  private readonly inflight = new Map<string, Promise<T>>();

  /** Returns the in-flight promise for `key`, or starts `fn` and shares it until it settles. */
  run(key: string, fn: () => Promise<T>): Promise<T> {
    const existing = this.inflight.get(key);
    if (existing) return existing;
    const started = fn().finally(() => this.inflight.delete(key));
    this.inflight.set(key, started);
    return started;
  }
}

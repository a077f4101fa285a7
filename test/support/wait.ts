/**
 * The one waiting helper of the tests: polls a check until it returns a truthy value. A check that
 * throws counts as not yet (the last error is named if time runs out), so a probe of a server that
 * is still starting needs no try/catch of its own. Use it for what a test cannot drive with the fake
 * clock: other processes, sockets, real timers.
 */
export interface WaitOptions {
  /** Give up after this long (a number as the third argument means this). Default 30 s. */
  timeoutMs?: number;
  /** Longest pause between checks; pauses start at 5 ms and double up to it. Default 100 ms. */
  intervalMs?: number;
  /** Checked after each miss: a message (a process it waits on died) fails the wait at once. */
  stopIf?: () => string | null;
}

export async function eventually<T>(check: () => T | Promise<T>, what: string | (() => string), options: WaitOptions | number = {}): Promise<NonNullable<T>> {
  const { timeoutMs = 30_000, intervalMs = 100, stopIf } = typeof options === "number" ? { timeoutMs: options } : options;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  let pauseMs = 5;
  const description = () => (typeof what === "function" ? what() : what);
  for (;;) {
    try {
      const value = await check();
      if (value) return value as NonNullable<T>;
      lastError = undefined;
    } catch (error) {
      lastError = error;
    }
    const stopped = stopIf?.();
    if (stopped) throw new Error(`${stopped} while waiting for ${description()}`);
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${description()}${lastError ? `: ${String(lastError)}` : ""}`);
    }
    await new Promise((resolve) => setTimeout(resolve, pauseMs));
    pauseMs = Math.min(intervalMs, pauseMs * 2);
  }
}

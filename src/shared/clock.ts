/**
 * Injected time: "now" and timers. Production uses {@link systemClock}; tests pass the fake clock of
 * test/support/fake-clock.ts and advance it instead of sleeping. Every room that waits or measures
 * receives a Clock instead of calling Date.now() or setTimeout itself.
 */
export interface Clock {
  nowMs(): number;
  /** Runs `callback` once after `delayMs`. */
  setTimeout(callback: () => void, delayMs: number, options?: TimerOptions): Timer;
  /** Runs `callback` every `intervalMs` until cancelled. */
  setInterval(callback: () => void, intervalMs: number, options?: TimerOptions): Timer;
}

/** A scheduled callback; `cancel()` is idempotent. */
export interface Timer {
  cancel(): void;
}

export interface TimerOptions {
  /** The pending timer alone does not keep the process alive (Node's `unref`). Default false. */
  unref?: boolean;
}

export const systemClock: Clock = {
  nowMs: () => Date.now(),
  setTimeout(callback, delayMs, options) {
    const handle = setTimeout(callback, delayMs);
    if (options?.unref) handle.unref();
    return { cancel: () => clearTimeout(handle) };
  },
  setInterval(callback, intervalMs, options) {
    const handle = setInterval(callback, intervalMs);
    if (options?.unref) handle.unref();
    return { cancel: () => clearInterval(handle) };
  },
};

/** Resolves after `delayMs` on `clock`: the one `sleep` of the controller rooms. */
export function sleep(clock: Clock, delayMs: number, options?: TimerOptions): Promise<void> {
  return new Promise((resolve) => clock.setTimeout(resolve, delayMs, options));
}

/**
 * Runs `callback` on the next turn of the event loop, after pending I/O. Not time (a fake clock does not
 * hold it back): it lets other work on the loop run first.
 */
export function nextTurn(callback: () => void): void {
  setImmediate(callback);
}

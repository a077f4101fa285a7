/** Timer functions, injected so tests advance time instead of waiting for it. */
export interface Timers {
  setTimeout(callback: () => void, delayMs: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** Node's timers, unref'd: a pending lease timer alone does not keep the process alive. */
export const systemTimers: Timers = {
  setTimeout: (callback, delayMs) => setTimeout(callback, delayMs).unref(),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/**
 * Runs a store's expiry sweep every `intervalMs` (0 disables it) without keeping the process
 * alive; `stop()` cancels the timer and waits for a sweep already running.
 */
export class TtlSweeper {
  private readonly timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> = Promise.resolve();

  constructor(intervalMs: number, sweep: () => Promise<unknown>) {
    if (intervalMs > 0) {
      this.timer = setInterval(() => {
        // A failed sweep leaves expired documents for the next one; reads hide them meanwhile.
        this.running = sweep().catch(() => undefined);
      }, intervalMs);
      this.timer.unref();
    }
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.running;
  }
}

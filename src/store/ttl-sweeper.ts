/**
 * Runs a store's expiry sweep every `intervalMs` (0 disables it) without keeping the process
 * alive; `stop()` cancels the timer and waits for a sweep already running.
 */
import { systemClock, type Clock, type Timer } from "../shared/clock.js";

export class TtlSweeper {
  private readonly timer: Timer | undefined;
  private running: Promise<unknown> = Promise.resolve();

  constructor(intervalMs: number, sweep: () => Promise<unknown>, clock: Clock = systemClock) {
    if (intervalMs > 0) {
      this.timer = clock.setInterval(
        () => {
          // A failed sweep leaves expired documents for the next one; reads hide them meanwhile.
          this.running = sweep().catch(() => undefined);
        },
        intervalMs,
        { unref: true },
      );
    }
  }

  async stop(): Promise<void> {
    this.timer?.cancel();
    await this.running;
  }
}

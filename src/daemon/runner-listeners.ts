/** The subscribers of the runner's events. */
import { RunnerError } from "./runner-errors.js";
import type { RunnerEvent } from "./runner-types.js";

/**
 * At most `listenersMax` subscribers (INVALID_COMMAND beyond), each receiving every event
 * synchronously and in order. A listener that throws is ignored: its failure is its own, and the
 * others still receive the event.
 */
export class RunnerListeners {
  private readonly listeners = new Set<(event: RunnerEvent) => void>();

  constructor(private readonly listenersMax: number) {}

  /** Adds a listener; returns the function that removes it. */
  subscribe(listener: (event: RunnerEvent) => void): () => void {
    if (this.listeners.size >= this.listenersMax) throw new RunnerError("INVALID_COMMAND", `At most ${this.listenersMax} runner listeners`);
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  emit(event: RunnerEvent): void {
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch {
        // A listener's failure is its own; the runner keeps reporting to the others.
      }
    }
  }
}

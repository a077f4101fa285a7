/**
 * The injected {@link Clock} as xstate's clock: the delays of the scheduler's actors (instance
 * timeouts, evaluation ticks, a node's grace period) run on the same clock as the rest of the
 * controller, so tests advance a fake clock instead of waiting.
 */
import type { Clock, Timer } from "../shared/clock.js";

/** What xstate's `createActor(…, { clock })` calls. */
export interface ActorClock {
  setTimeout(callback: () => void, delayMs: number): Timer;
  clearTimeout(timer: Timer): void;
}

export function actorClock(clock: Clock): ActorClock {
  return {
    setTimeout: (callback, delayMs) => clock.setTimeout(callback, delayMs),
    clearTimeout: (timer) => timer.cancel(),
  };
}

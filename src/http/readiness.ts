/**
 * Builds the readiness probe of `/api/v1/system/ready` from the four components it checks. Each check
 * really calls its component (the stores' `ping()` round-trips to the database) and counts as
 * failed when it throws, answers false or takes longer than `timeoutMs`.
 */
import type { ReadinessProbe } from "./routes/system.js";
import { systemClock, type Clock, type Timer } from "../shared/clock.js";

/** A check slower than this counts as failed, so a hung database cannot hang the probe. */
export const READINESS_CHECK_TIMEOUT_MS = 2_000;

/** Something that can be asked whether it works. */
export type HealthCheck = () => Promise<boolean | void> | boolean | void;

export interface ReadinessComponents {
  /** The document store: `() => documents.ping()`. */
  stateStore: HealthCheck;
  /** The key-value store: `() => kv.ping()`. */
  coordinationStore: HealthCheck;
  scheduler: HealthCheck;
  platformModules: HealthCheck;
}

async function passes(check: HealthCheck, timeoutMs: number, clock: Clock): Promise<boolean> {
  let timer: Timer | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = clock.setTimeout(() => resolve(false), timeoutMs);
  });
  try {
    const run = Promise.resolve()
      .then(check)
      .then((result) => result !== false)
      // A check that throws is a failed check: the readiness answer shows it as false.
      .catch(() => false);
    return await Promise.race([run, timeout]);
  } finally {
    timer?.cancel();
  }
}

/** A probe running the four checks concurrently. */
export function createReadinessProbe(components: ReadinessComponents, timeoutMs = READINESS_CHECK_TIMEOUT_MS, clock: Clock = systemClock): ReadinessProbe {
  return {
    async checks() {
      const [stateStore, coordinationStore, scheduler, platformModules] = await Promise.all([
        passes(components.stateStore, timeoutMs, clock),
        passes(components.coordinationStore, timeoutMs, clock),
        passes(components.scheduler, timeoutMs, clock),
        passes(components.platformModules, timeoutMs, clock),
      ]);
      return { stateStore, coordinationStore, scheduler, platformModules };
    },
  };
}

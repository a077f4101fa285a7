/**
 * Builds the readiness probe of `/api/v1/system/ready` from the four components it checks. Each check
 * really calls its component (the stores' `ping()` round-trips to the database) and counts as
 * failed when it throws, answers false or takes longer than `timeoutMs`.
 */
import type { ReadinessProbe } from "./routes/system.js";

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

async function passes(check: HealthCheck, timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs);
  });
  try {
    const run = Promise.resolve()
      .then(check)
      .then((result) => result !== false)
      // A check that throws is a failed check: the readiness answer shows it as false.
      .catch(() => false);
    return await Promise.race([run, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** A probe running the four checks concurrently. */
export function createReadinessProbe(components: ReadinessComponents, timeoutMs = READINESS_CHECK_TIMEOUT_MS): ReadinessProbe {
  return {
    async checks() {
      const [stateStore, coordinationStore, scheduler, platformModules] = await Promise.all([
        passes(components.stateStore, timeoutMs),
        passes(components.coordinationStore, timeoutMs),
        passes(components.scheduler, timeoutMs),
        passes(components.platformModules, timeoutMs),
      ]);
      return { stateStore, coordinationStore, scheduler, platformModules };
    },
  };
}

/**
 * The one shape of a test's controller.yml overrides, for every helper that starts a controller
 * (`controller.ts` in a child process or in this process, `http-app.ts` for the HTTP tests, the
 * e2e cluster harness): a partial controller.yml, deep-merged over the helper's defaults.
 */
import type { ControllerConfig } from "../../src/config/schema.js";

type DeepPartial<T> = { [K in keyof T]?: T[K] extends readonly unknown[] ? T[K] : T[K] extends object ? DeepPartial<T[K]> : T[K] };

/**
 * A partial controller.yml, deep-merged over the test defaults. Known keys are typed; any other key
 * is allowed too, so tests can write invalid or removed keys on purpose.
 */
export type ConfigOverrides = DeepPartial<ControllerConfig> & Record<string, unknown>;

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** Deep-merges `over` onto `base` (objects merge, everything else replaces). */
export function mergeConfig(base: ConfigOverrides, over: ConfigOverrides = {}): ConfigOverrides {
  const out: ConfigOverrides = { ...base };
  for (const [k, v] of Object.entries(over)) out[k] = isPlainObject(v) && isPlainObject(out[k]) ? mergeConfig(out[k] as ConfigOverrides, v) : v;
  return out;
}

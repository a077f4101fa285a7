/** Time-to-live of a node join token: `ttlSeconds` (integer) and/or `ttl` (duration text). */
import { validationError } from "../../shared/errors.js";

/** Lifetime when the request names none (the client default, 1h). */
export const tokenTtlSecondsDefault = 3600;
/** Shorter tokens would expire before a daemon could be started with them. */
export const tokenTtlSecondsMin = 60;
/** Long-lived join credentials are a liability; 30 days covers staged rollouts. */
export const tokenTtlSecondsMax = 30 * 24 * 3600;

const unitSeconds: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 };
const durationPattern = /^(?:\d{1,7}[smhd])+$/;

/** Parses a duration such as `90s`, `30m`, `1h`, `7d` or `1h30m` into seconds; null when malformed. */
export function parseDurationSeconds(text: string): number | null {
  const trimmed = text.trim().toLowerCase();
  if (!durationPattern.test(trimmed)) return null;
  let total = 0;
  for (const [, amount, unit] of trimmed.matchAll(/(\d+)([smhd])/g)) total += Number(amount) * unitSeconds[unit];
  return total;
}

/**
 * Resolves the requested lifetime: `ttlSeconds` or `ttl` (both must agree when both are given),
 * 1 hour when neither is. 422 naming the field when malformed or outside the bounds.
 */
export function resolveTtlSeconds(input: { ttlSeconds?: number; ttl?: string }): number {
  let seconds: number | undefined;
  let field = "ttlSeconds";
  if (input.ttlSeconds !== undefined) {
    if (!Number.isInteger(input.ttlSeconds)) throw validationError("ttlSeconds: must be an integer");
    seconds = input.ttlSeconds;
  }
  if (input.ttl !== undefined) {
    const parsed = parseDurationSeconds(input.ttl);
    if (parsed === null) throw validationError("ttl: must be a duration such as 30m, 1h or 7d");
    if (seconds !== undefined && seconds !== parsed) throw validationError("ttl: disagrees with ttlSeconds");
    seconds = parsed;
    field = "ttl";
  }
  seconds ??= tokenTtlSecondsDefault;
  if (seconds < tokenTtlSecondsMin || seconds > tokenTtlSecondsMax) {
    throw validationError(`${field}: must be between ${tokenTtlSecondsMin} and ${tokenTtlSecondsMax} seconds`);
  }
  return seconds;
}

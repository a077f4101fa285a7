/** ISO 8601 helpers shared by the domain services. */
import { validationError } from "../../shared/errors.js";

const isoPattern = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/;

/** Formats epoch milliseconds as a UTC ISO 8601 timestamp. */
export function isoFromMs(ms: number): string {
  return new Date(ms).toISOString();
}

/**
 * Parses an ISO 8601 date or date-time (e.g. `2026-01-31` or `2026-01-31T10:00:00Z`) to epoch
 * milliseconds; a 422 naming `field` when the text is not one.
 */
export function parseIsoMs(text: string, field: string): number {
  const ms = isoPattern.test(text) ? Date.parse(text) : Number.NaN;
  if (Number.isNaN(ms)) throw validationError(`${field}: must be an ISO 8601 timestamp`);
  return ms;
}

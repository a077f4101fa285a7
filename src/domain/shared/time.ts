/** ISO 8601 helpers shared by the domain services. */
import { validationError } from "../../shared/errors.js";

const isoPattern = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/;

/** Formats epoch milliseconds as a UTC ISO 8601 timestamp. */
export function isoFromMs(ms: number): string {
  return new Date(ms).toISOString();
}

/** A `+hh:mm` offset whose `+` an unencoded query string turned into a space. */
const spacedOffsetPattern = /(T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?) (\d{2}:?\d{2})$/;

/**
 * Parses an ISO 8601 date or date-time (e.g. `2026-01-31` or `2026-01-31T10:00:00Z`) to epoch
 * milliseconds; a 422 naming `field` when the text is not one. A positive offset whose `+` arrived
 * as a space (an unencoded query string) is read as `+`.
 */
export function parseIsoMs(text: string, field: string): number {
  const normalized = text.trim().replace(spacedOffsetPattern, "$1+$2");
  const ms = isoPattern.test(normalized) ? Date.parse(normalized) : Number.NaN;
  if (Number.isNaN(ms)) throw validationError(`${field}: must be an ISO 8601 timestamp`);
  return ms;
}

/**
 * String formats used by route schemas. typebox validates a `format` only when a checker is
 * registered in its (process-wide) FormatRegistry, and reports "Unknown format" otherwise, so
 * `createHttpApp` registers these before any route validates. Registration is idempotent.
 */
import { FormatRegistry } from "@sinclair/typebox";

const DATE_TIME_PATTERN = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})$/;

/** RFC 3339 date-time (`2026-01-15T12:00:00.000Z`, offsets allowed) that names a real instant. */
export function isDateTime(value: string): boolean {
  return DATE_TIME_PATTERN.test(value) && !Number.isNaN(Date.parse(value));
}

/** Registers the formats route schemas use (`date-time`); safe to call more than once. */
export function registerSchemaFormats(): void {
  if (!FormatRegistry.Has("date-time")) FormatRegistry.Set("date-time", isDateTime);
}

/** Argument parsers for numeric flags and the repeatable-flag collector, shared by commands. */
import { InvalidArgumentError } from "commander";

/** Parses a non-negative integer flag value (commander argParser). */
export function parseCount(value: string): number {
  if (!/^\d+$/.test(value.trim())) throw new InvalidArgumentError("expected a non-negative integer");
  const parsed = Number(value);
  if (!Number.isSafeInteger(parsed)) throw new InvalidArgumentError("number too large");
  return parsed;
}

/** Collects a repeatable flag into an array (commander argParser with a `[]` default). */
export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

/** Splits a comma-separated list, dropping blanks. */
export function commaList(value: string): string[] {
  return value
    .split(",")
    .map((item) => item.trim())
    .filter((item) => item !== "");
}

/** Durations accepted by `--since` and `--ttl`: a number and a unit s, m, h or d. */
const durationPattern = /^(\d+)\s*(s|m|h|d)$/i;
const unitMs: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** Milliseconds of a duration like `90s`, `15m`, `1h`, `7d`, or undefined when it is not one. */
export function durationMs(value: string): number | undefined {
  const match = durationPattern.exec(value.trim());
  if (!match) return undefined;
  return Number(match[1]) * unitMs[match[2].toLowerCase()];
}

/**
 * `--since` value to an ISO 8601 instant: a duration (`1h` = one hour ago) or anything
 * `Date` parses (`2026-11-20`, `2026-11-20T10:00:00Z`).
 */
export function sinceToIso(value: string, nowMs: number = Date.now()): string {
  const ms = durationMs(value);
  if (ms !== undefined) return new Date(nowMs - ms).toISOString();
  const parsed = Date.parse(value);
  if (Number.isNaN(parsed)) throw new InvalidArgumentError("expected a duration like 1h or 30m, or an ISO 8601 date");
  return new Date(parsed).toISOString();
}

/** `--wait`-like durations: a number and a unit ms, s, m or h (`500ms`, `5s`); `0` alone is zero (commander argParser). */
export function parseDurationMs(value: string): number {
  const match = /^(\d+)\s*(ms|s|m|h)?$/i.exec(value.trim());
  if (!match || (match[2] === undefined && match[1] !== "0")) throw new InvalidArgumentError("expected a duration like 500ms, 5s or 1m");
  const factor: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };
  return Number(match[1]) * factor[(match[2] ?? "ms").toLowerCase()];
}

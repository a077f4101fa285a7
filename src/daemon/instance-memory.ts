/**
 * Memory the daemon's instances use: the resident set of each instance process, read from
 * `/proc/<pid>/statm` (Linux). This, not the host's total use, is what a node reports as used:
 * `maxMemoryMb` is the budget for instances, and whatever else runs on the host is outside it.
 * Where `/proc` cannot be read the process counts as 0.
 */
import { readFileSync } from "node:fs";

/** Bytes per page for statm's counts (4 KiB on every Linux platform this runs on). */
const pageBytes = 4096;

/** Resident memory of one process in MiB, 0 when unreadable. */
export function residentMemoryMb(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/statm`, "utf8").trim().split(/\s+/);
    const pages = Number(fields[1]);
    return Number.isFinite(pages) ? (pages * pageBytes) / (1024 * 1024) : 0;
  } catch {
    // The process exited meanwhile (or there is no /proc): it holds no memory to report.
    return 0;
  }
}

/** Resident memory of the given processes in whole MiB. */
export function instancesMemoryMb(pids: Iterable<number | null>): number {
  let total = 0;
  for (const pid of pids) if (pid !== null && pid > 0) total += residentMemoryMb(pid);
  return Math.round(total);
}

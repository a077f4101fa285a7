/**
 * Ending with the process that started us. A process run through wrappers (npx and `npm run` run
 * a shell that runs it; `npm start` runs a shell that runs tsx that runs it) is left running when
 * a wrapper dies without passing a signal on: SIGKILL, or a shell, which does not forward SIGTERM.
 * Such a process remembers the chain of its ancestors (`generations` of them, read from /proc on
 * Linux; only the parent elsewhere) and, once one of them is gone, stops too, so killing the
 * wrapper by its PID leaves nothing running. Only processes that know they were started by such a
 * wrapper watch: `nohup cloudctl … &` from a shell that then exits must keep running.
 */
import { readFileSync } from "node:fs";
import { systemClock } from "./clock.js";

/** How often the ancestors are checked; the process outlives a gone one by at most this long. */
export const parentCheckIntervalMs = 1_000;

/** The parent of `pid` from /proc, or null when it cannot be read (gone, or not Linux). */
function parentOf(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name in parentheses may hold spaces: the fields after its closing one are state, ppid, ...
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
  } catch {
    return null;
  }
}

/** [pid, its parent] for this process's first `generations` ancestors (stopping at init). */
function ancestry(generations: number): [number, number | null][] {
  const chain: [number, number | null][] = [[process.pid, process.ppid]];
  let pid = process.ppid;
  for (let i = 1; i < generations && pid > 1; i++) {
    const parent = parentOf(pid);
    if (parent === null) break;
    chain.push([pid, parent]);
    pid = parent;
  }
  return chain;
}

/**
 * Calls `onGone` once when one of this process's first `generations` ancestors is gone (1: the
 * parent). The timer does not keep the process alive. Returns the function that stops watching.
 */
export function whenParentGone(onGone: () => void, options: { generations?: number; intervalMs?: number } = {}): () => void {
  const chain = ancestry(Math.max(1, options.generations ?? 1));
  // An ancestor is gone when /proc no longer shows it with the parent it had (a reused pid has another).
  const intact = () => chain.every(([pid, parent], index) => (index === 0 ? process.ppid === parent : parentOf(pid) === parent));
  // Process-level, in wall time: the daemon's and the CLI's mains call it, no injected clock.
  const timer = systemClock.setInterval(
    () => {
      if (intact()) return;
      timer.cancel();
      onGone();
    },
    options.intervalMs ?? parentCheckIntervalMs,
    { unref: true },
  );
  return () => timer.cancel();
}

/** True when npm (npm run, npm start, npx) started this process or one of its ancestors. */
export function startedByNpm(env: NodeJS.ProcessEnv = process.env): boolean {
  return env.npm_lifecycle_event !== undefined || env.npm_command !== undefined;
}

/**
 * Ending with the parent: a process started by a wrapper (npx, npm run, tsx, `npm start`'s
 * controller) is re-parented when that wrapper dies without passing a signal on (SIGKILL, or a shell
 * that does not forward SIGTERM). Such a process checks its parent id now and then and, once it
 * changed, stops too, so killing the wrapper by its PID leaves nothing running.
 */

/** How often the parent id is compared; the process outlives its parent by at most this long. */
export const parentCheckIntervalMs = 1_000;

/**
 * Calls `onGone` once when the parent process is gone (this process was re-parented). The timer
 * does not keep the process alive. Returns the function that stops watching.
 */
export function whenParentGone(onGone: () => void, intervalMs: number = parentCheckIntervalMs): () => void {
  const parent = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    onGone();
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}

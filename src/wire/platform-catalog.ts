/**
 * The platforms a daemon of this release can run, by id: both sides import this list. The daemon
 * builds their definitions (src/daemon/platforms.ts, checked against this list by its tests); the
 * controller refuses a group whose platform is not among them (422 VALIDATION_ERROR), because an
 * instance of an unknown platform could only ever fail to start. A daemon defines no platforms of
 * its own yet, so this list is what the cluster can run.
 */

/** Every platform id a daemon runs, in display order. */
export const DAEMON_PLATFORM_IDS: readonly string[] = ["simulated", "simulated-proxy", "simulated-standalone", "paper", "velocity"];

/** What a platform needs besides the daemon, for the error and help texts. */
export const PLATFORM_NEEDS: Readonly<Record<string, string>> = {
  paper: "Java on the node and the server jar (group jarFile, default server.jar) in one of the group's templates",
  velocity: "Java on the node and the proxy jar (group jarFile, default server.jar) in one of the group's templates",
};

/** The known id closest to `id` (edit distance at most 2), for a "did you mean" hint; null when none is close. */
export function closestPlatform(id: string): string | null {
  let best: { id: string; distance: number } | null = null;
  for (const known of DAEMON_PLATFORM_IDS) {
    const distance = editDistance(id.toLowerCase(), known);
    if (distance <= 2 && (best === null || distance < best.distance)) best = { id: known, distance };
  }
  return best?.id ?? null;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length];
}

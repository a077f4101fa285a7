/**
 * What the scheduler and the deployment reconciler read from the plugin API: the player counts the
 * registry knows and the load the plugins reported.
 */
import type { InstanceMetricsService } from "./instance-metrics.js";
import type { PlayerService } from "./players.js";

/** The known player count of each instance (instances without one are left out); empty before the registry exists. */
export function playerCountsOf(players: () => PlayerService | null): (ids: readonly string[]) => Promise<Map<string, number>> {
  return async (ids) => {
    const registry = players();
    if (!registry) return new Map();
    const counts = await Promise.all(ids.map(async (id) => [id, await registry.knownCountOn(id)] as const));
    return new Map(counts.filter((entry): entry is readonly [string, number] => entry[1] !== null));
  };
}

/** The latest load sample of each instance that reported one. */
export function loadSamplesOf(metrics: Pick<InstanceMetricsService, "latest">) {
  return async (ids: readonly string[]) =>
    (await Promise.all(ids.map((id) => metrics.latest(id)))).flatMap((s) =>
      s ? [{ instanceId: s.instanceId, tps1m: s.tps1m, msptAvg: s.msptAvg, reportedAtMs: Date.parse(s.reportedAt) }] : [],
    );
}

/** When each instance last reported its metrics (instances that never did are left out). */
export function metricsReportedAtOf(metrics: Pick<InstanceMetricsService, "latest">): (ids: readonly string[]) => Promise<Map<string, number>> {
  return async (ids) => {
    const reported = new Map<string, number>();
    for (const id of ids) {
      const snapshot = await metrics.latest(id);
      if (snapshot) reported.set(id, Date.parse(snapshot.reportedAt));
    }
    return reported;
  };
}

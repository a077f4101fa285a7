/**
 * Metrics from the controller's sampled history (`GET metrics/history`): instances, players,
 * scheduler pass time, HTTP latency, players per group and TPS per group (the mean of the group's
 * instances' TPS series). Charts refresh every half minute.
 */
import { useState } from "preact/hooks";
import { useApp, useQuery } from "../lib/app-context.js";
import { GROUPS_KEY, groupsQuery } from "../lib/queries.js";
import type { GroupListItem, HistoryAnswer, Instance, KeysetPage } from "../lib/types.js";
import { Card, ErrorBox, Field, Loading, PageHeader } from "../ui/controls.js";
import { Chart, type ChartSeries } from "../ui/chart.js";
import { meanSeries } from "../lib/series.js";

const RANGES: [string, number][] = [
  ["1 hour", 3600_000],
  ["6 hours", 6 * 3600_000],
  ["24 hours", 24 * 3600_000],
  ["7 days", 7 * 24 * 3600_000],
];
/** Series one request may name (the route's limit is 50). */
const SERIES_PER_QUERY = 48;
/** Groups charted by players. */
const GROUPS_CHARTED = 8;

const pick = (answer: HistoryAnswer | undefined, name: string, label = name): ChartSeries[] => [
  { label, points: answer?.series.find((s) => s.name === name)?.points ?? [] },
];

export function MetricsPage() {
  const { api } = useApp();
  const [rangeMs, setRangeMs] = useState(RANGES[0][1]);
  const from = () => new Date(Date.now() - rangeMs).toISOString();
  const base = useQuery<HistoryAnswer>(`history:base:${rangeMs}`, { load: () => api.get("metrics/history", { from: from() }), pollMs: 30_000 });
  const groups = useQuery<GroupListItem[]>(GROUPS_KEY, groupsQuery(api));
  const running = useQuery<KeysetPage<Instance>>("services?state=RUNNING&metrics", {
    load: () => api.get("services", { state: "RUNNING", pageSize: SERIES_PER_QUERY }),
  });
  const top = [...(groups.data ?? [])].sort((a, b) => b.totalPlayers - a.totalPlayers).slice(0, GROUPS_CHARTED);
  const perGroup = useQuery<HistoryAnswer>(top.length ? `history:groups:${rangeMs}:${top.map((g) => g.name).join(",")}` : null, {
    load: () => api.get("metrics/history", { from: from(), series: top.map((g) => `players:${g.name}`).join(",") }),
    pollMs: 30_000,
  });
  const instances = running.data?.data ?? [];
  const tps = useQuery<HistoryAnswer>(instances.length ? `history:tps:${rangeMs}:${instances.map((i) => i.id).join(",")}` : null, {
    load: () => api.get("metrics/history", { from: from(), series: instances.map((i) => `tps:${i.id}`).join(",") }),
    pollMs: 30_000,
  });
  const tpsByGroup: ChartSeries[] = [...new Set(instances.map((i) => i.group))].map((group) => ({
    label: group,
    points: meanSeries(instances.filter((i) => i.group === group).map((i) => tps.data?.series.find((s) => s.name === `tps:${i.id}`)?.points ?? [])),
  }));
  return (
    <>
      <PageHeader
        title="Metrics"
        actions={
          <Field label="Range">
            <select value={String(rangeMs)} onChange={(e) => setRangeMs(Number(e.currentTarget.value))}>
              {RANGES.map(([label, ms]) => (
                <option key={ms} value={ms}>
                  {label}
                </option>
              ))}
            </select>
          </Field>
        }
      />
      <ErrorBox error={base.error} />
      {base.data === undefined && !base.error ? <Loading /> : null}
      {base.data ? (
        <div class="grid">
          <Card>
            <Chart title="Instances" series={pick(base.data, "instances")} />
          </Card>
          <Card>
            <Chart title="Players" series={pick(base.data, "players")} />
          </Card>
          <Card>
            <Chart title="Scheduler pass" series={pick(base.data, "scheduler.tickMs", "pass time")} unit=" ms" />
          </Card>
          <Card>
            <Chart title="HTTP latency" series={pick(base.data, "http.latencyMs", "latency")} unit=" ms" />
          </Card>
          <Card>
            <Chart
              title="Players per group"
              series={(perGroup.data?.series ?? []).map((s) => ({ label: s.name.slice("players:".length), points: s.points }))}
            />
          </Card>
          <Card>
            <Chart title="TPS per group" series={tpsByGroup} />
          </Card>
        </div>
      ) : null}
      {base.data?.truncated ? <p class="muted">The range held more samples than one answer carries; the newest were left out.</p> : null}
    </>
  );
}

// The failover benchmark's figures: one record per kill, the per-metric summary (count, median,
// min, max, deadlines missed) and both as Markdown tables.

/** What one SIGKILL of a controller showed; times in ms after the kill, null when not seen in time. */
export interface KillRecord {
  round: number;
  /** Which controller was chosen: the Raft leader, or the group's lease holder. */
  target: "leader" | "lease holder";
  victim: string;
  victimId: string;
  wasLeader: boolean;
  heldLease: boolean;
  /** Nodes whose daemon stream the victim held. */
  streams: string[];
  newLeaderMs?: number | null;
  newLeader?: string | null;
  raftWriteMs: number | null;
  raftWriteRefused: Record<string, number>;
  leaseBefore: { controllerId: string; fencingToken: number };
  leaseTakeoverMs?: number | null;
  leaseAfter?: { controllerId: string; fencingToken: number | null } | null;
  reconnects: { nodeId: string; sessionMovedMs: number | null; onlineMs: number | null; controllerId: string | null }[];
  /** Instance ids whose process after the round (victim back, all settled) is not the one before. */
  restarted: string[];
  /** Instance ids after the round that were not there before. */
  newInstances: string[];
  /** Instance ids seen with two processes at once during the round. */
  twice: string[];
  processSamples: number;
  victimBackMs: number;
}

/** Count, median, min, max of one metric; `missed` counts the kills where it was not seen in time. */
export interface MetricSummary {
  count: number;
  missed: number;
  medianMs: number | null;
  minMs: number | null;
  maxMs: number | null;
}

export function summarize(values: readonly (number | null | undefined)[]): MetricSummary {
  const seen = values.filter((v): v is number => typeof v === "number").sort((a, b) => a - b);
  const missed = values.filter((v) => v === null).length;
  if (seen.length === 0) return { count: 0, missed, medianMs: null, minMs: null, maxMs: null };
  const mid = Math.floor(seen.length / 2);
  const median = seen.length % 2 === 1 ? seen[mid] : (seen[mid - 1] + seen[mid]) / 2;
  return { count: seen.length, missed, medianMs: Math.round(median), minMs: seen[0], maxMs: seen.at(-1)! };
}

/** The summary of every metric over `kills`. */
export function summarizeKills(kills: readonly KillRecord[]) {
  const ofLeader = kills.filter((k) => k.wasLeader);
  const ofFollower = kills.filter((k) => !k.wasLeader);
  const reconnects = kills.flatMap((k) => k.reconnects);
  return {
    newLeader: summarize(ofLeader.map((k) => k.newLeaderMs)),
    raftWriteAfterLeaderKill: summarize(ofLeader.map((k) => k.raftWriteMs)),
    raftWriteAfterFollowerKill: summarize(ofFollower.map((k) => k.raftWriteMs)),
    leaseTakeover: summarize(kills.filter((k) => k.heldLease).map((k) => k.leaseTakeoverMs)),
    daemonSessionMoved: summarize(reconnects.map((r) => r.sessionMovedMs)),
    daemonOnline: summarize(reconnects.map((r) => r.onlineMs)),
    victimBack: summarize(kills.map((k) => k.victimBackMs)),
    instancesRestarted: kills.reduce((n, k) => n + k.restarted.length, 0),
    instancesNew: kills.reduce((n, k) => n + k.newInstances.length, 0),
    instancesRunTwice: kills.reduce((n, k) => n + k.twice.length, 0),
  };
}

export type KillsSummary = ReturnType<typeof summarizeKills>;

const seconds = (ms: number | null | undefined) => (ms === undefined ? "–" : ms === null ? "**timeout**" : `${(ms / 1000).toFixed(2)} s`);

function rolesOf(kill: KillRecord): string {
  if (kill.wasLeader && kill.heldLease) return "leader **and** lease holder";
  if (kill.wasLeader) return "leader";
  if (kill.heldLease) return "lease holder";
  return "follower";
}

/** One row per kill. */
export function killsTable(kills: readonly KillRecord[]): string {
  const lines = [
    "| round | killed | victim | was | streams held | new leader | Raft write | lease takeover (token) | daemon ONLINE elsewhere | restarted / twice | victim back |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
  ];
  for (const k of kills) {
    const lease =
      k.leaseTakeoverMs === undefined ? "–" : `${seconds(k.leaseTakeoverMs)} (${k.leaseBefore.fencingToken} → ${k.leaseAfter?.fencingToken ?? "?"})`;
    const reconnect = k.reconnects.length === 0 ? "–" : k.reconnects.map((r) => seconds(r.onlineMs)).join(", ");
    lines.push(
      `| ${k.round} | ${k.target} | ${k.victim} | ${rolesOf(k)} | ${k.streams.length} | ${seconds(k.newLeaderMs)} | ${seconds(k.raftWriteMs)} | ${lease} | ${reconnect} | ${k.restarted.length} / ${k.twice.length} | ${seconds(k.victimBackMs)} |`,
    );
  }
  return lines.join("\n");
}

/** Median, min and max per metric, with the target where the issue sets one. */
export function summaryTable(summary: KillsSummary, leaseTargetMs: number): string {
  const row = (name: string, m: MetricSummary, target = "") =>
    `| ${name} | ${m.count}${m.missed ? ` (+${m.missed} timed out)` : ""} | ${seconds(m.medianMs)} | ${seconds(m.minMs)} | ${seconds(m.maxMs)} | ${target} |`;
  const leaseMet = summary.leaseTakeover.missed === 0 && (summary.leaseTakeover.maxMs ?? 0) <= leaseTargetMs;
  return [
    "| metric | n | median | min | max | target |",
    "|---|---|---|---|---|---|",
    row("Raft: survivor reports a new leader (leader killed)", summary.newLeader),
    row("Raft: a write commits (leader killed)", summary.raftWriteAfterLeaderKill),
    row("Raft: a write commits (follower killed)", summary.raftWriteAfterFollowerKill),
    row(
      "group lease: held by a survivor, higher token",
      summary.leaseTakeover,
      `≤ ${seconds(leaseTargetMs)} — ${summary.leaseTakeover.count === 0 ? "not measured" : leaseMet ? "met" : "**missed**"}`,
    ),
    row("daemon: session entry names a survivor", summary.daemonSessionMoved),
    row("daemon: node ONLINE through a survivor", summary.daemonOnline),
    row("victim restarted and serving", summary.victimBack),
    `| instances restarted by the failovers | ${summary.instancesRestarted} | | | | 0 — ${summary.instancesRestarted === 0 ? "met" : "**missed**"} |`,
    `| instance ids seen running twice | ${summary.instancesRunTwice} | | | | 0 — ${summary.instancesRunTwice === 0 ? "met" : "**missed**"} |`,
  ].join("\n");
}

/**
 * How a deployment looks in cloudctl (`deploy show`, `deploy --watch`): the settings, the batch the
 * rollout is on, and per instance its role, state and the health gate (a countdown while a new
 * instance serves its `minHealthySeconds`). On a terminal `--watch` redraws the whole view every
 * 2 s; elsewhere (a pipe, a CI log) it prints one timestamped line per change, so a log shows what
 * happened and nothing twice.
 */
import { display, type Output } from "../render.js";

/** One instance as `GET …/deployments/{revision}` shows it. */
export interface DeploymentInstanceView {
  id: string;
  node: string;
  state: string;
  deploymentRevision: number;
  role: string;
  healthy: boolean;
  retired: boolean;
  playerCount: number;
  runningSince?: string | null;
  healthyAt?: string | null;
}

/** A deployment as `GET …/deployments/{revision}` answers it. */
export interface DeploymentView {
  group: string;
  revision: number;
  previousRevision?: number;
  state: string;
  phase?: string;
  desiredInstances?: number | null;
  canaryCount?: number | null;
  promoted?: boolean;
  reason?: string | null;
  createdAt?: string;
  settings?: { batchSize?: number; healthGate?: boolean; minHealthySeconds?: number; strategy?: string };
  progress?: { newInstances: number; newHealthy: number; oldInstances: number; retired: number };
  instances?: DeploymentInstanceView[];
}

/** The health column of a NEW instance: passed, a countdown, or what it waits for. */
export function healthCell(i: DeploymentInstanceView, nowMs: number): string {
  if (i.role !== "NEW") return "";
  if (i.healthy) return "yes";
  if (i.state === "CRASHED") return "failed";
  if (!i.healthyAt) return i.state === "RUNNING" ? "checking" : "after RUNNING";
  const leftS = Math.ceil((Date.parse(i.healthyAt) - nowMs) / 1000);
  return leftS > 0 ? `in ${leftS}s` : "checking";
}

/** Which batch the rollout is on: `batch 2 of 4 (1 at a time)`, or the canary phase. */
export function batchText(d: DeploymentView): string {
  if (d.desiredInstances === null || d.desiredInstances === undefined) return "waiting for the rollout's first step";
  const healthy = d.progress?.newHealthy ?? 0;
  if (d.phase === "CANARY") return `canaries: ${healthy}/${d.canaryCount ?? 0} healthy${d.promoted ? "" : " (then: deploy promote, or the promotion timeout)"}`;
  const size = Math.max(1, d.settings?.batchSize ?? 1);
  const total = Math.max(1, Math.ceil(d.desiredInstances / size));
  const current = Math.min(total, Math.floor(healthy / size) + 1);
  if (d.phase === "DONE") return `${total} batch(es) of ${size}, done`;
  return `batch ${current} of ${total} (${size} at a time)`;
}

/** The progress line: new healthy of desired, old left, retired. */
export function progressText(d: DeploymentView): string {
  const p = d.progress ?? { newInstances: 0, newHealthy: 0, oldInstances: 0, retired: 0 };
  const desired = d.desiredInstances ?? p.newInstances;
  return `${p.newHealthy}/${desired} new healthy, ${p.oldInstances} old left, ${p.retired} retired`;
}

/** Renders the whole view (show, and each frame of a watch on a terminal). */
export function renderDeployment(out: Output, d: DeploymentView, nowMs: number): void {
  const gate = d.settings?.healthGate === false ? "off (RUNNING is enough)" : `${d.settings?.minHealthySeconds ?? "?"} s RUNNING without a crash`;
  out.fields([
    ["Group", d.group],
    ["Revision", `${d.revision} (from ${display(d.previousRevision)})`],
    ["State", out.state(d.state)],
    ["Phase", display(d.phase)],
    ["Desired", d.desiredInstances ?? "(decided at the first step)"],
    ["Health gate", gate],
    ["Batch", batchText(d)],
    ["Progress", progressText(d)],
    ...(d.reason ? ([["Reason", d.reason]] as [string, unknown][]) : []),
  ]);
  if (!d.instances) return;
  out.line();
  out.table(
    ["ID", "NODE", "STATE", "REV", "ROLE", "HEALTHY", "RETIRED", "PLAYERS"],
    d.instances.map((i) => [
      out.accent(i.id),
      i.node,
      out.state(i.state),
      i.deploymentRevision,
      i.role,
      healthCell(i, nowMs),
      i.retired ? "yes" : "",
      i.playerCount,
    ]),
  );
}

/**
 * The facts of a frame that a change line reports, by key: the deployment's state and progress,
 * and each instance's state, health and retirement (no countdowns: they change every frame).
 */
export function changeFacts(d: DeploymentView): Map<string, string> {
  const facts = new Map<string, string>();
  facts.set(
    "deployment",
    `deployment ${d.revision} of ${d.group}: ${d.state}${d.phase ? ` ${d.phase}` : ""}; ${batchText(d)}; ${progressText(d)}${d.reason ? `; ${d.reason}` : ""}`,
  );
  for (const i of d.instances ?? []) {
    const health =
      i.role === "NEW"
        ? i.healthy
          ? ", healthy"
          : i.healthyAt
            ? `, healthy at ${i.healthyAt.slice(11, 19)} if it keeps running`
            : ""
        : i.retired
          ? ", retired"
          : "";
    facts.set(`instance ${i.id}`, `${i.id} ${i.role} ${i.state}${i.node ? ` on ${i.node}` : ""}${health}`);
  }
  return facts;
}

/** The lines of `next` that differ from `previous` (all of them for the first frame). */
export function changedLines(previous: Map<string, string> | null, next: Map<string, string>): string[] {
  return [...next].filter(([key, line]) => previous?.get(key) !== line).map(([, line]) => line);
}

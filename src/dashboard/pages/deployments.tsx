/**
 * Deployments: pick a group, see its deployments, start one with every option, and follow one:
 * phase, per-instance progress with the health gate, pause, resume, promote, rollback.
 */
import { useState } from "preact/hooks";
import { useApp, useQuery } from "../lib/app-context.js";
import { GROUPS_KEY, groupsQuery } from "../lib/queries.js";
import { errorMessage } from "../lib/api.js";
import { time } from "../lib/format.js";
import { href, navigate, type Route } from "../lib/router.js";
import type { Deployment, GroupListItem } from "../lib/types.js";
import { Badge, Button, Card, Facts, Field, PageHeader, QueryView, StateBadge } from "../ui/controls.js";
import { Dialog, useConfirm } from "../ui/dialog.js";
import { DataTable } from "../ui/table.js";

export function DeploymentsPage({ route }: { route: Route }) {
  const [group, revision] = route.parts.slice(1);
  if (group && revision) return <DeploymentDetail group={group} revision={Number(revision)} />;
  if (group) return <GroupDeployments group={group} startOpen={route.query.has("new")} />;
  return <PickGroup />;
}

function PickGroup() {
  const { api } = useApp();
  const groups = useQuery<GroupListItem[]>(GROUPS_KEY, groupsQuery(api));
  return (
    <>
      <PageHeader title="Deployments" />
      <p class="muted">Deployments roll new start settings (platform version, jar, memory, templates) out to a group's instances. Pick a group:</p>
      <QueryView state={groups}>
        {(list) => (
          <ul>
            {list.map((g) => (
              <li key={g.name}>
                <a href={href(["deployments", g.name])}>{g.name}</a>
              </li>
            ))}
          </ul>
        )}
      </QueryView>
    </>
  );
}

const watchGroup = (group: string) => (e: { type: string; data: Record<string, unknown> }) =>
  (e.type.startsWith("DEPLOYMENT_") && e.data.groupName === group) || (e.type === "INSTANCE_STATE_CHANGED" && e.data.group === group);

function GroupDeployments({ group, startOpen }: { group: string; startOpen: boolean }) {
  const { api } = useApp();
  const path = `groups/${encodeURIComponent(group)}/deployments`;
  const list = useQuery<Deployment[]>(path, { load: () => api.get(path), watch: watchGroup(group), minIntervalMs: 1_000 });
  const [starting, setStarting] = useState(startOpen);
  return (
    <>
      <p>
        <a href={href(["deployments"])}>← Deployments</a> · <a href={href(["groups", group])}>group {group}</a>
      </p>
      <PageHeader
        title={`Deployments of ${group}`}
        actions={
          <Button kind="primary" perm="deployments.manage" onClick={() => setStarting(true)}>
            Start deployment
          </Button>
        }
      />
      <QueryView state={list}>
        {(rows) => (
          <DataTable
            label="Deployments"
            rows={[...rows].sort((a, b) => b.revision - a.revision)}
            rowKey={(d) => String(d.revision)}
            empty="No deployment yet."
            columns={[
              { title: "Revision", render: (d) => <a href={href(["deployments", group, d.revision])}>#{d.revision}</a> },
              { title: "State", render: (d) => <StateBadge state={d.state} /> },
              { title: "Phase", render: (d) => d.phase },
              { title: "Strategy", render: (d) => d.settings.strategy },
              { title: "Outcome", render: (d) => d.outcome ?? (d.reason || "–") },
              { title: "Started", render: (d) => time(d.createdAt) },
              { title: "By", render: (d) => d.createdBy },
            ]}
          />
        )}
      </QueryView>
      <Dialog open={starting} title={`Start a deployment of ${group}`} onClose={() => setStarting(false)} wide>
        <StartForm
          group={group}
          onDone={(revision) => {
            setStarting(false);
            if (revision !== null) navigate(href(["deployments", group, revision]));
          }}
        />
      </Dialog>
    </>
  );
}

function StartForm({ group, onDone }: { group: string; onDone(revision: number | null): void }) {
  const { api, toast } = useApp();
  const [v, setV] = useState<Record<string, string | boolean>>({
    strategy: "ROLLING",
    batchSize: "1",
    canary: "none",
    canaryInstances: "1",
    canaryPercent: "10",
    healthGate: true,
    minHealthySeconds: "10",
    autoRollback: true,
    promotionTimeoutSeconds: "",
    platformVersion: "",
    jarFile: "",
    memoryMb: "",
    templates: "",
  });
  const [error, setError] = useState<string | null>(null);
  const text = (name: string) => ({ name, value: String(v[name]), onInput: (e: Event) => setV({ ...v, [name]: (e.currentTarget as HTMLInputElement).value }) });
  const check = (name: string) => ({
    name,
    type: "checkbox" as const,
    checked: v[name] === true,
    onChange: (e: Event) => setV({ ...v, [name]: (e.currentTarget as HTMLInputElement).checked }),
  });
  const n = (name: string) => (v[name] === "" ? undefined : Number(v[name]));
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(null);
    const changes: Record<string, unknown> = {};
    if (v.platformVersion) changes.platformVersion = v.platformVersion;
    if (v.jarFile) changes.jarFile = v.jarFile;
    if (v.memoryMb) changes.memoryMb = Number(v.memoryMb);
    if (v.templates !== "")
      changes.templates = String(v.templates)
        .split(",")
        .map((t) => t.trim())
        .filter(Boolean);
    try {
      const created = await api.post<Deployment>(`groups/${encodeURIComponent(group)}/deployments`, {
        strategy: v.strategy,
        batchSize: n("batchSize"),
        canaryInstances: v.canary === "instances" ? n("canaryInstances") : undefined,
        canaryPercent: v.canary === "percent" ? n("canaryPercent") : undefined,
        healthGate: v.healthGate === true,
        minHealthySeconds: n("minHealthySeconds"),
        autoRollback: v.autoRollback === true,
        promotionTimeoutSeconds: n("promotionTimeoutSeconds"),
        changes,
      });
      toast(`Deployment #${created.revision} started`, "success");
      onDone(created.revision);
    } catch (err) {
      setError(errorMessage(err));
    }
  };
  return (
    <form onSubmit={submit} aria-label="Start deployment">
      <fieldset class="form-grid">
        <legend>Changes (empty fields keep the current value)</legend>
        <Field label="Platform version">
          <input {...text("platformVersion")} />
        </Field>
        <Field label="Jar file">
          <input {...text("jarFile")} />
        </Field>
        <Field label="Memory (MB)">
          <input type="number" min="1" {...text("memoryMb")} />
        </Field>
        <Field label="Templates" hint="comma-separated; replaces the list">
          <input {...text("templates")} />
        </Field>
      </fieldset>
      <fieldset class="form-grid">
        <legend>Rollout</legend>
        <Field label="Strategy">
          <select {...text("strategy")}>
            <option>ROLLING</option>
            <option>RECREATE</option>
          </select>
        </Field>
        <Field label="Batch size">
          <input type="number" min="1" {...text("batchSize")} />
        </Field>
        <Field label="Canary">
          <select {...text("canary")}>
            <option value="none">none</option>
            <option value="instances">a number of instances</option>
            <option value="percent">a percentage</option>
          </select>
        </Field>
        {v.canary === "instances" ? (
          <Field label="Canary instances">
            <input type="number" min="0" {...text("canaryInstances")} />
          </Field>
        ) : null}
        {v.canary === "percent" ? (
          <Field label="Canary percent">
            <input type="number" min="0" max="100" {...text("canaryPercent")} />
          </Field>
        ) : null}
        <Field label="Healthy for (s)" hint="an instance counts as healthy after running this long">
          <input type="number" min="0" {...text("minHealthySeconds")} />
        </Field>
        <Field label="Promotion timeout (s)" hint="canary: promote by itself after this; empty waits for you">
          <input type="number" min="1" {...text("promotionTimeoutSeconds")} />
        </Field>
      </fieldset>
      <label class="check">
        <input {...check("healthGate")} /> Health gate: wait for new instances to be healthy before the next batch
      </label>
      <label class="check">
        <input {...check("autoRollback")} /> Roll back by itself when new instances fail
      </label>
      {error ? <p class="error-box">{error}</p> : null}
      <div class="actions end">
        <button type="button" class="btn btn-plain" onClick={() => onDone(null)}>
          Cancel
        </button>
        <button type="submit" class="btn btn-primary">
          Start deployment
        </button>
      </div>
    </form>
  );
}

function DeploymentDetail({ group, revision }: { group: string; revision: number }) {
  const { api, toast } = useApp();
  const path = `groups/${encodeURIComponent(group)}/deployments/${revision}`;
  const deployment = useQuery<Deployment>(path, { load: () => api.get(path), watch: watchGroup(group), minIntervalMs: 500, pollMs: 5_000 });
  const [confirm, confirmDialog] = useConfirm();
  const act = async (action: string, body?: unknown) => {
    try {
      await api.post(`${path}/${action}`, body);
      toast(`Deployment #${revision}: ${action} done`, "success");
      deployment.refresh();
    } catch (err) {
      toast(`${action}: ${errorMessage(err)}`, "error");
    }
  };
  return (
    <>
      <p>
        <a href={href(["deployments", group])}>← Deployments of {group}</a>
      </p>
      <QueryView state={deployment}>
        {(d) => {
          const active = d.state === "IN_PROGRESS" || d.state === "PAUSED";
          const total = d.desiredInstances ?? Math.max(d.progress.newInstances, 1);
          return (
            <>
              <PageHeader
                title={`${group} #${d.revision}`}
                actions={
                  active ? (
                    <>
                      {d.state === "IN_PROGRESS" ? (
                        <Button perm="deployments.manage" onClick={() => act("pause")}>
                          Pause
                        </Button>
                      ) : (
                        <Button perm="deployments.manage" onClick={() => act("resume")}>
                          Resume
                        </Button>
                      )}
                      {d.phase === "CANARY" && !d.promoted ? (
                        <Button perm="deployments.manage" kind="primary" onClick={() => act("promote")}>
                          Promote
                        </Button>
                      ) : null}
                      <Button
                        perm="deployments.manage"
                        kind="danger"
                        onClick={async () => {
                          if (
                            await confirm({
                              title: "Roll back",
                              message: "Stop the rollout and return the group to the previous revision's instances?",
                              danger: true,
                              confirmLabel: "Roll back",
                            })
                          )
                            await act("rollback", { restore: true });
                        }}
                      >
                        Roll back
                      </Button>
                    </>
                  ) : null
                }
              >
                <p data-deployment-state={d.state}>
                  <StateBadge state={d.state} /> phase {d.phase}
                  {d.outcome ? ` · outcome ${d.outcome}` : ""}
                  {d.reason ? ` · ${d.reason}` : ""}
                </p>
              </PageHeader>
              <Card title="Progress">
                <div
                  class="progress"
                  role="progressbar"
                  aria-valuemin={0}
                  aria-valuemax={total}
                  aria-valuenow={d.progress.newHealthy}
                  aria-label="New instances healthy"
                >
                  <span style={{ width: `${Math.min(100, Math.round((d.progress.newHealthy / total) * 100))}%` }} />
                </div>
                <p>
                  {d.progress.newHealthy} of {total} new instances healthy · {d.progress.newInstances} new · {d.progress.oldInstances} old left ·{" "}
                  {d.progress.retired} retired
                </p>
                <DataTable
                  label="Instances of the rollout"
                  rows={d.instances}
                  rowKey={(i) => i.id}
                  empty="No instance yet."
                  columns={[
                    { title: "Instance", render: (i) => <a href={href(["instances", i.id])}>{i.id}</a> },
                    { title: "Role", render: (i) => <Badge tone={i.role === "NEW" ? "info" : "muted"}>{i.role}</Badge> },
                    { title: "State", render: (i) => <StateBadge state={i.state} /> },
                    {
                      title: "Health gate",
                      render: (i) => (i.healthy ? <Badge tone="ok">healthy</Badge> : i.retired ? <Badge>retired</Badge> : <Badge tone="warn">waiting</Badge>),
                    },
                    { title: "Node", render: (i) => i.node },
                    { title: "Players", className: "num", render: (i) => i.playerCount },
                  ]}
                />
              </Card>
              <Card title="Settings">
                <Facts
                  items={[
                    ...Object.entries(d.settings).map(([k, val]): [string, string] => [k, val === null ? "–" : String(val)]),
                    ...Object.entries(d.changes).map(([k, val]): [string, string] => [`change: ${k}`, JSON.stringify(val)]),
                    ["Started", time(d.createdAt)],
                    ["Finished", time(d.finishedAt)],
                    ["By", d.createdBy],
                  ]}
                />
              </Card>
              {confirmDialog}
            </>
          );
        }}
      </QueryView>
    </>
  );
}

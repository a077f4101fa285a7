/**
 * One group: its record, why it is not starting (`schedulingIssue` in words), the actions (edit,
 * scale, maintenance, start, resume, delete with a typed confirmation) and its instances, players
 * and metrics.
 */
import { useState } from "preact/hooks";
import { useApp, useQuery } from "../lib/app-context.js";
import { errorMessage } from "../lib/api.js";
import { href, navigate, type Route } from "../lib/router.js";
import { ago, duration } from "../lib/format.js";
import { groupStatus, type Group, type HistoryAnswer, type Instance, type KeysetPage, type Player } from "../lib/types.js";
import { patchInstanceRows } from "../live/event-reducer.js";
import { Button, Card, Facts, Field, PageHeader, QueryView, StateBadge, Tabs } from "../ui/controls.js";
import { Dialog, useConfirm } from "../ui/dialog.js";
import { DataTable } from "../ui/table.js";
import { Chart } from "../ui/chart.js";
import { EditGroupForm } from "./group-form.js";

/** What each scheduling issue means and what to do about it. */
const ISSUE_ADVICE: Record<string, string> = {
  NO_ONLINE_NODE: "No node is ONLINE to run its instances. Start a daemon with a join token, or undrain a node.",
  ALL_CORDONED: "Every ONLINE node is cordoned. Uncordon one on the Nodes page.",
  NODES_SHUTTING_DOWN: "Every usable node's daemon is shutting down. The group is placed again when a node connects.",
  INSUFFICIENT_MEMORY: "No node has enough free memory for one instance. Lower the group's memory, stop other instances, or add a node.",
  PORTS_EXHAUSTED: "Every port of the group's port range is taken on the nodes that could run it. Stop instances or give the group a wider range.",
  START_SLOTS_BUSY: "The nodes are busy starting other instances; placement goes on when a start slot frees.",
  STATIC_NODE_UNAVAILABLE: "A static instance waits for the node that holds its directory. Bring that node back online.",
};

export function GroupDetail({ name, route }: { name: string; route: Route }) {
  const { api, toast } = useApp();
  const path = `groups/${encodeURIComponent(name)}`;
  const tab = route.query.get("tab") ?? "summary";
  const group = useQuery<Group>(path, {
    load: () => api.get(path),
    watch: (e) =>
      (e.data.groupName ?? e.data.group) === name && (e.type.startsWith("GROUP_") || e.type === "INSTANCE_STATE_CHANGED" || e.type.startsWith("DEPLOYMENT_")),
  });
  const [editing, setEditing] = useState(false);
  const [scaling, setScaling] = useState(false);
  const [confirm, confirmDialog] = useConfirm();
  const [busy, setBusy] = useState<string | null>(null);

  const act = async (label: string, run: () => Promise<unknown>, done?: (result: unknown) => string) => {
    setBusy(label);
    try {
      const result = await run();
      toast(done ? done(result) : `${label}: done`, "success");
      group.refresh();
    } catch (err) {
      toast(`${label}: ${errorMessage(err)}`, "error");
    } finally {
      setBusy(null);
    }
  };

  return (
    <>
      <p>
        <a href={href(["groups"])}>← Groups</a>
      </p>
      <QueryView state={group}>
        {(g) => (
          <>
            <PageHeader
              title={g.name}
              actions={
                <>
                  <Button perm="groups.update" onClick={() => setEditing(true)}>
                    Edit
                  </Button>
                  <Button perm="groups.update" onClick={() => setScaling(true)}>
                    Scale
                  </Button>
                  <Button
                    perm="groups.update"
                    busy={busy === "Maintenance"}
                    onClick={() => act("Maintenance", () => api.patch(path, { maintenance: !g.maintenance }))}
                  >
                    {g.maintenance ? "End maintenance" : "Maintenance"}
                  </Button>
                  <Button
                    perm="groups.start"
                    busy={busy === "Start"}
                    onClick={() =>
                      act(
                        "Start",
                        () => api.post<{ count: number; reason?: string }>(`groups/${encodeURIComponent(g.name)}/start`),
                        (r) => {
                          const { count, reason } = r as { count: number; reason?: string };
                          return count > 0 ? `${count} instance(s) scheduled` : `Nothing started${reason ? `: ${reason}` : ""}`;
                        },
                      )
                    }
                  >
                    Start
                  </Button>
                  {g.paused ? (
                    <Button
                      perm="groups.update"
                      kind="primary"
                      busy={busy === "Resume"}
                      onClick={() => act("Resume", () => api.post(`groups/${encodeURIComponent(g.name)}/resume`))}
                    >
                      Resume
                    </Button>
                  ) : null}
                  <Button
                    perm="groups.delete"
                    kind="danger"
                    onClick={async () => {
                      const ok = await confirm({
                        title: `Delete group ${g.name}`,
                        message: "Every instance of the group is stopped, and the group is gone. This cannot be undone.",
                        typed: g.name,
                        danger: true,
                        confirmLabel: "Delete group",
                      });
                      if (!ok) return;
                      try {
                        await api.delete(path);
                        toast(`Group ${g.name} deleted`, "success");
                        navigate(href(["groups"]));
                      } catch (err) {
                        toast(`Delete: ${errorMessage(err)}`, "error");
                      }
                    }}
                  >
                    Delete
                  </Button>
                </>
              }
            >
              <p>
                <StateBadge state={groupStatus(g)} /> {g.paused ? <StateBadge state="PAUSED" /> : null} {g.runningInstances} running · {g.totalPlayers} players
              </p>
            </PageHeader>
            <Why group={g} />
            <Tabs
              tabs={[
                ["summary", "Summary"],
                ["instances", "Instances"],
                ["players", "Players"],
                ["metrics", "Metrics"],
              ]}
              current={tab}
              onSelect={(id) => navigate(href(["groups", g.name], { tab: id }), true)}
            />
            {tab === "summary" ? <Summary group={g} /> : null}
            {tab === "instances" ? <GroupInstances name={g.name} /> : null}
            {tab === "players" ? <GroupPlayers name={g.name} /> : null}
            {tab === "metrics" ? <GroupMetrics name={g.name} /> : null}
            <Dialog open={editing} title={`Edit ${g.name}`} onClose={() => setEditing(false)} wide>
              <EditGroupForm
                group={g}
                onDone={(changed) => {
                  setEditing(false);
                  if (changed) group.refresh();
                }}
              />
            </Dialog>
            <ScaleDialog open={scaling} group={g} onClose={() => setScaling(false)} onSaved={() => group.refresh()} />
            {confirmDialog}
          </>
        )}
      </QueryView>
    </>
  );
}

/** "Why isn't it starting?" in words. */
function Why({ group }: { group: Group }) {
  if (group.paused) {
    return (
      <p class="notice" data-issue="PAUSED">
        <strong>Paused after repeated crashes.</strong> The scheduler starts nothing for this group until it is resumed. Look at its crashes, fix the cause,
        then press Resume.
      </p>
    );
  }
  if (group.maintenance) {
    return <p class="notice">In maintenance: the scheduler skips the group and it accepts no new players.</p>;
  }
  const issue = group.schedulingIssue;
  if (!issue) return null;
  return (
    <p class="notice" data-issue={issue.code} role="status">
      <strong>Why isn't it starting?</strong> {ISSUE_ADVICE[issue.code] ?? "The scheduler cannot place its instances."}{" "}
      <span class="muted">
        ({issue.message}; since {ago(issue.since)})
      </span>
    </p>
  );
}

function Summary({ group: g }: { group: Group }) {
  return (
    <Card>
      <Facts
        items={[
          ["Platform", `${g.platform}${g.platformVersion ? ` ${g.platformVersion}` : ""}`],
          ["Jar file", g.jarFile],
          ["Templates", g.templates.length ? g.templates.join(", ") : "none"],
          ["Scaling mode", g.scalingMode],
          ["Instances", `${g.minInstances} to ${g.maxInstances}`],
          ["Max players", g.maxPlayers],
          ["Memory", `${g.memoryMb} MB`],
          ["Routing", g.routing],
          ["Ports", `${g.portRange.start}–${g.portRange.end}`],
          ["Priority", g.priority],
          ["Update strategy", `${g.updateStrategy.type}, surge ${g.updateStrategy.maxSurge}, unavailable ${g.updateStrategy.maxUnavailable}`],
          ["Load scaling", g.loadScaling ? JSON.stringify(g.loadScaling) : "off"],
          ["Static", g.static ? "yes" : "no"],
          ["Parent", g.parent ?? "none"],
        ]}
      />
      <p>
        <a href={href(["deployments", g.name])}>Deployments of {g.name}</a>
      </p>
    </Card>
  );
}

function ScaleDialog({ open, group, onClose, onSaved }: { open: boolean; group: Group; onClose(): void; onSaved(): void }) {
  const { api, toast } = useApp();
  const [min, setMin] = useState(String(group.minInstances));
  const [max, setMax] = useState(String(group.maxInstances));
  const [error, setError] = useState<string | null>(null);
  return (
    <Dialog open={open} title={`Scale ${group.name}`} onClose={onClose}>
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          try {
            await api.patch(`groups/${encodeURIComponent(group.name)}`, { minInstances: Number(min), maxInstances: Number(max) });
            toast(`${group.name} scaled to ${min}–${max}`, "success");
            onSaved();
            onClose();
          } catch (err) {
            setError(errorMessage(err));
          }
        }}
      >
        <Field label="Minimum instances">
          <input name="minInstances" type="number" min="0" value={min} onInput={(e) => setMin(e.currentTarget.value)} />
        </Field>
        <Field label="Maximum instances">
          <input name="maxInstances" type="number" min="0" value={max} onInput={(e) => setMax(e.currentTarget.value)} />
        </Field>
        {error ? <p class="error-box">{error}</p> : null}
        <div class="actions end">
          <button type="submit" class="btn btn-primary">
            Scale
          </button>
        </div>
      </form>
    </Dialog>
  );
}

export function GroupInstances({ name }: { name: string }) {
  const { api } = useApp();
  const key = `services?group=${name}`;
  const list = useQuery<readonly Instance[]>(key, {
    load: () => api.get<Instance[]>("services", { group: name }),
    watch: (e) => e.type === "INSTANCE_STATE_CHANGED" && e.data.group === name,
    patch: (rows, batch) => patchInstanceRows(rows, batch),
  });
  return (
    <QueryView state={list}>
      {(rows) => (
        <DataTable
          label={`Instances of ${name}`}
          rows={rows}
          rowKey={(i) => i.id}
          empty="No instance."
          columns={[
            { title: "Instance", render: (i) => <a href={href(["instances", i.id])}>{i.id}</a> },
            { title: "State", render: (i) => <StateBadge state={i.state} /> },
            { title: "Node", render: (i) => i.node },
            { title: "Port", className: "num", render: (i) => i.port },
            { title: "Players", className: "num", render: (i) => i.playerCount },
            { title: "Uptime", render: (i) => duration(i.uptimeMs) },
            { title: "Revision", className: "num", render: (i) => i.deploymentRevision },
          ]}
        />
      )}
    </QueryView>
  );
}

function GroupPlayers({ name }: { name: string }) {
  const { api, can } = useApp();
  const players = useQuery<KeysetPage<Player>>(can("players.view") ? `players?group=${name}` : null, {
    load: () => api.get("players", { group: name, pageSize: 200 }),
    watch: (e) => e.type.startsWith("PLAYER_") && (e.data.group === name || e.type === "PLAYER_TRANSFER"),
  });
  if (!can("players.view")) return <p class="muted">Listing players needs the players.view permission.</p>;
  return (
    <QueryView state={players}>
      {(page) => (
        <DataTable
          label={`Players of ${name}`}
          rows={page.data}
          rowKey={(p) => p.uuid}
          empty="Nobody is online in this group."
          columns={[
            { title: "Player", render: (p) => p.name },
            { title: "Instance", render: (p) => (p.instanceId ? <a href={href(["instances", p.instanceId])}>{p.instanceId}</a> : "–") },
            { title: "Since", render: (p) => ago(p.instanceSince) },
          ]}
        />
      )}
    </QueryView>
  );
}

function GroupMetrics({ name }: { name: string }) {
  const { api, can } = useApp();
  const current = useQuery<Record<string, unknown>>(`groups/${name}/metrics`, {
    load: () => api.get(`groups/${encodeURIComponent(name)}/metrics`),
    pollMs: 15_000,
  });
  const history = useQuery<HistoryAnswer>(can("system.view") ? `history:players:${name}` : null, {
    load: () => api.get("metrics/history", { series: `players:${name}`, from: new Date(Date.now() - 6 * 3600_000).toISOString() }),
    pollMs: 30_000,
  });
  return (
    <>
      <Card title="Latest reported metrics">
        <QueryView state={current}>
          {(m) => (
            <Facts
              items={[
                ["Reporting instances", String(m.reportingInstances ?? 0)],
                ["TPS (1 min, average)", String(m.tps1mAvg ?? "–")],
                ["TPS (1 min, lowest)", String(m.tps1mMin ?? "–")],
                ["MSPT average", String(m.msptAvg ?? "–")],
                ["Heap", `${String(m.heapUsedMb ?? 0)} / ${String(m.heapMaxMb ?? 0)} MB`],
                ["Players", String(m.playerCount ?? 0)],
              ]}
            />
          )}
        </QueryView>
      </Card>
      {history.data ? <Chart title="Players (6 h)" series={history.data.series.map((s) => ({ label: s.name, points: s.points }))} /> : null}
    </>
  );
}

/** One instance: its record, stop and force-stop, the console, its crash records and its latest metrics. */
import { useApp, useQuery } from "../lib/app-context.js";
import { errorMessage } from "../lib/api.js";
import { href } from "../lib/router.js";
import { duration, time } from "../lib/format.js";
import type { Crash, Instance } from "../lib/types.js";
import { Button, Card, Facts, PageHeader, QueryView, StateBadge } from "../ui/controls.js";
import { useConfirm } from "../ui/dialog.js";
import { Console } from "./console.js";
import { CrashList } from "./crashes.js";

export function InstanceDetail({ id }: { id: string }) {
  const { api, can, toast } = useApp();
  const path = `services/${encodeURIComponent(id)}`;
  const instance = useQuery<Instance>(path, {
    load: () => api.get(path),
    watch: (e) => e.data.instanceId === id && (e.type === "INSTANCE_STATE_CHANGED" || e.type === "INSTANCE_CRASHED"),
    patch: (i, batch) => {
      const last = [...batch].reverse().find((e) => e.type === "INSTANCE_STATE_CHANGED" && e.data.instanceId === id);
      return last && last.data.newState !== i.state ? { ...i, state: String(last.data.newState) } : i;
    },
  });
  const crashes = useQuery<Crash[]>(instance.data && can("crashes.view") ? `crashes?group=${instance.data.group}` : null, {
    load: () => api.get("crashes", { group: instance.data!.group }),
    watch: (e) => e.type === "INSTANCE_CRASHED" && e.data.instanceId === id,
  });
  const metrics = useQuery<Record<string, unknown> | null>(`${path}/metrics`, {
    load: () => api.get<Record<string, unknown>>(`${path}/metrics`).catch(() => null),
    pollMs: 15_000,
  });
  const [confirm, confirmDialog] = useConfirm();
  const stop = async (force: boolean) => {
    if (force) {
      const ok = await confirm({
        title: `Force-stop ${id}`,
        message: "The process is killed at once; players on it are dropped.",
        danger: true,
        confirmLabel: "Force-stop",
      });
      if (!ok) return;
    }
    try {
      await api.post(`${path}/${force ? "force-stop" : "stop"}`);
      toast(`${id}: ${force ? "force-stop" : "stop"} sent`, "success");
      instance.refresh();
    } catch (err) {
      toast(`${force ? "Force-stop" : "Stop"}: ${errorMessage(err)}`, "error");
    }
  };
  return (
    <>
      <p>
        <a href={href(["instances"])}>← Instances</a>
      </p>
      <QueryView state={instance}>
        {(i) => (
          <>
            <PageHeader
              title={i.id}
              actions={
                <>
                  <Button perm="instances.stop" onClick={() => stop(false)}>
                    Stop
                  </Button>
                  <Button perm="instances.stop" kind="danger" onClick={() => stop(true)}>
                    Force-stop
                  </Button>
                </>
              }
            >
              <p>
                <span data-instance-state={i.state}>
                  <StateBadge state={i.state} />
                </span>{" "}
                in <a href={href(["groups", i.group])}>{i.group}</a>
              </p>
            </PageHeader>
            <Card>
              <Facts
                items={[
                  ["Node", i.node || "–"],
                  ["Port", i.port],
                  ["Players", i.playerCount],
                  ["Memory", i.memoryMb ? `${i.memoryMb} MB` : "–"],
                  ["Started", time(i.startedAt)],
                  ["Uptime", duration(i.uptimeMs)],
                  ["Deployment revision", i.deploymentRevision],
                ]}
              />
            </Card>
            {can("instances.console") ? (
              <Card title="Console">
                <Console instanceId={i.id} />
              </Card>
            ) : null}
            {metrics.data ? (
              <Card title="Latest metrics">
                <Facts
                  items={[
                    ["TPS (1 / 5 / 15 min)", `${String(metrics.data.tps1m)} / ${String(metrics.data.tps5m)} / ${String(metrics.data.tps15m)}`],
                    ["MSPT", String(metrics.data.msptAvg)],
                    ["Heap", `${String(metrics.data.heapUsedMb)} / ${String(metrics.data.heapMaxMb)} MB`],
                    ["Players", `${String(metrics.data.playerCount)} / ${String(metrics.data.maxPlayers)}`],
                    ["Reported", time(String(metrics.data.reportedAt))],
                  ]}
                />
              </Card>
            ) : null}
            {can("crashes.view") ? (
              <Card title="Crashes">
                <QueryView state={crashes}>{(list) => <CrashList crashes={list.filter((c) => c.instanceId === i.id)} />}</QueryView>
              </Card>
            ) : null}
            {confirmDialog}
          </>
        )}
      </QueryView>
    </>
  );
}

/** Players: who is where (filter by group, instance, name), keyset pages, and moving a player. */
import { useState } from "preact/hooks";
import { ofTypes, useApp, useQuery } from "../lib/app-context.js";
import { errorMessage } from "../lib/api.js";
import { ago } from "../lib/format.js";
import { href, navigate, type Route } from "../lib/router.js";
import type { KeysetPage, Player } from "../lib/types.js";
import { Button, Field, PageHeader, QueryView } from "../ui/controls.js";
import { Dialog } from "../ui/dialog.js";
import { DataTable, KeysetPager } from "../ui/table.js";

const PLAYERS_PER_PAGE = 100;

export function PlayersPage({ route }: { route: Route }) {
  const { api } = useApp();
  const group = route.query.get("group") ?? "";
  const instance = route.query.get("instance") ?? "";
  const name = route.query.get("name") ?? "";
  const [cursors, setCursors] = useState<string[]>([]);
  const [moving, setMoving] = useState<Player | null>(null);
  const cursor = cursors.at(-1) ?? "";
  const setFilter = (key: string, value: string) => {
    setCursors([]);
    navigate(href(["players"], { group, instance, name, [key]: value }), true);
  };
  const page = useQuery<KeysetPage<Player>>(`players?g=${group}&i=${instance}&n=${name}&c=${cursor}`, {
    load: () => api.get("players", { group, instance, name, cursor, pageSize: PLAYERS_PER_PAGE }),
    watch: ofTypes("PLAYER_CONNECTED", "PLAYER_DISCONNECTED", "PLAYER_TRANSFER"),
    minIntervalMs: 750,
  });
  return (
    <>
      <PageHeader title="Players" />
      <form class="filters" role="search" onSubmit={(e) => e.preventDefault()}>
        <Field label="Name starts with">
          <input name="name" value={name} onChange={(e) => setFilter("name", e.currentTarget.value.trim())} />
        </Field>
        <Field label="Group">
          <input name="group" value={group} onChange={(e) => setFilter("group", e.currentTarget.value.trim())} placeholder="any" />
        </Field>
        <Field label="Instance">
          <input name="instance" value={instance} onChange={(e) => setFilter("instance", e.currentTarget.value.trim())} placeholder="any" />
        </Field>
      </form>
      <QueryView state={page}>
        {(p) => (
          <>
            <DataTable
              label="Players"
              rows={p.data}
              rowKey={(pl) => pl.uuid}
              empty="Nobody matches."
              columns={[
                {
                  title: "Player",
                  render: (pl) => (
                    <>
                      {pl.name}
                      <div class="muted mono">{pl.uuid}</div>
                    </>
                  ),
                },
                { title: "Group", render: (pl) => (pl.group ? <a href={href(["groups", pl.group])}>{pl.group}</a> : "–") },
                { title: "Instance", render: (pl) => (pl.instanceId ? <a href={href(["instances", pl.instanceId])}>{pl.instanceId}</a> : "on the proxy only") },
                { title: "Proxy", render: (pl) => pl.proxyInstanceId ?? "–" },
                { title: "Online", render: (pl) => ago(pl.connectedAt) },
                {
                  title: "",
                  render: (pl) => (
                    <Button perm="players.transfer" onClick={() => setMoving(pl)}>
                      Transfer
                    </Button>
                  ),
                },
              ]}
            />
            <KeysetPager cursors={cursors} next={p.nextCursor} total={p.total} shown={p.data.length} onPage={setCursors} />
          </>
        )}
      </QueryView>
      <TransferDialog player={moving} onClose={() => setMoving(null)} onDone={() => page.refresh()} />
    </>
  );
}

function TransferDialog({ player, onClose, onDone }: { player: Player | null; onClose(): void; onDone(): void }) {
  const { api, toast } = useApp();
  const [kind, setKind] = useState<"group" | "instance">("group");
  const [target, setTarget] = useState("");
  const [error, setError] = useState<string | null>(null);
  return (
    <Dialog open={player !== null} title={`Transfer ${player?.name ?? ""}`} onClose={onClose}>
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          setError(null);
          try {
            await api.post(`players/${player!.uuid}/transfer`, kind === "group" ? { group: target } : { targetInstanceId: target });
            toast(`${player!.name} is being moved to ${target}`, "success");
            onDone();
            onClose();
          } catch (err) {
            setError(errorMessage(err));
          }
        }}
      >
        <Field label="Move to">
          <select value={kind} onChange={(e) => setKind(e.currentTarget.value as "group" | "instance")}>
            <option value="group">the least-loaded instance of a group</option>
            <option value="instance">an instance</option>
          </select>
        </Field>
        <Field label={kind === "group" ? "Group" : "Instance id"}>
          <input required value={target} onInput={(e) => setTarget(e.currentTarget.value.trim())} />
        </Field>
        {error ? <p class="error-box">{error}</p> : null}
        <div class="actions end">
          <button type="submit" class="btn btn-primary">
            Transfer
          </button>
        </div>
      </form>
    </Dialog>
  );
}

/**
 * Cluster: members and the leader, singleton leases, controller join tokens (shown once), seed
 * rotation, ejecting a member, and the guided recover form for a lost quorum.
 */
import { useState } from "preact/hooks";
import { useApp, useQuery } from "../lib/app-context.js";
import { errorMessage } from "../lib/api.js";
import { time } from "../lib/format.js";
import type { Member } from "../lib/types.js";
import { Badge, Button, Can, Card, Facts, Field, PageHeader, QueryView, StateBadge } from "../ui/controls.js";
import { Dialog, SecretOnce, useConfirm, usePrompt } from "../ui/dialog.js";
import { DataTable } from "../ui/table.js";

interface ClusterRecord {
  clusterId: string;
  memberCount: number;
  activeConfigVersion: number | null;
  createdAt: string;
  nodeId: string;
  leaderId: string | null;
}
interface Lease {
  name: string;
  holder: string;
  fencingToken: number;
  grantedAt: string;
  expiresAt: string;
}
interface JoinToken {
  jti: string;
  label: string;
  status: string;
  createdAt: string;
  expiresAt: string;
}

export function ClusterPage() {
  const { api, toast } = useApp();
  const cluster = useQuery<ClusterRecord>("cluster", { load: () => api.get("cluster"), pollMs: 5_000 });
  const members = useQuery<{ members: Member[] }>("cluster/members", { load: () => api.get("cluster/members"), pollMs: 5_000 });
  const leases = useQuery<{ leases: Lease[] }>("cluster/leases", { load: () => api.get("cluster/leases"), pollMs: 5_000 });
  const [confirm, confirmDialog] = useConfirm();
  const [ask, promptDialog] = usePrompt();
  const eject = async (m: Member) => {
    const reason = await ask({
      title: `Eject ${m.nodeId}`,
      label: "Reason (optional)",
      hint: "Recorded in the audit log",
      optional: true,
      confirmLabel: "Next",
    });
    if (reason === null) return;
    if (
      !(await confirm({
        title: `Eject ${m.nodeId}`,
        message: "The member is removed from the cluster; it must join again with a new token.",
        typed: m.nodeId,
        danger: true,
        confirmLabel: "Eject",
      }))
    )
      return;
    try {
      await api.delete(`cluster/members/${encodeURIComponent(m.nodeId)}`, { reason: reason || undefined });
      toast(`${m.nodeId} ejected`, "success");
      members.refresh();
    } catch (err) {
      toast(`Eject: ${errorMessage(err)}`, "error");
    }
  };
  return (
    <>
      <PageHeader
        title="Cluster"
        actions={
          <Button
            perm="CLUSTER_MANAGE"
            kind="danger"
            onClick={async () => {
              if (
                !(await confirm({
                  title: "Rotate the seed secret",
                  message: "Every outstanding controller join token stops working.",
                  danger: true,
                  confirmLabel: "Rotate",
                }))
              )
                return;
              try {
                const r = await api.post<{ rotatedAt: string }>("cluster/seed/rotate", {});
                toast(`Seed rotated at ${time(r.rotatedAt)}`, "success");
              } catch (err) {
                toast(`Rotate: ${errorMessage(err)}`, "error");
              }
            }}
          >
            Rotate seed
          </Button>
        }
      />
      <Card title="Cluster">
        <QueryView state={cluster}>
          {(c) => (
            <Facts
              items={[
                ["Cluster id", <code>{c.clusterId}</code>],
                ["Leader", c.leaderId ?? <Badge tone="bad">none: no quorum</Badge>],
                ["This controller", <code>{c.nodeId}</code>],
                ["Members", c.memberCount],
                ["Config version", c.activeConfigVersion ?? "–"],
                ["Created", time(c.createdAt)],
              ]}
            />
          )}
        </QueryView>
      </Card>
      <Card title="Members">
        <QueryView state={members}>
          {(r) => (
            <DataTable
              label="Members"
              rows={r.members}
              rowKey={(m) => m.nodeId}
              columns={[
                { title: "Member", render: (m) => <code>{m.nodeId}</code> },
                { title: "Role", render: (m) => (m.leader ? <Badge tone="info">leader</Badge> : m.role) },
                { title: "REST", render: (m) => m.restAddr || "–" },
                { title: "gRPC", render: (m) => m.gRPCAddr || "–" },
                { title: "Raft", render: (m) => m.raftAddr },
                { title: "Joined", render: (m) => time(m.joinedAt) },
                {
                  title: "",
                  render: (m) =>
                    m.nodeId === cluster.data?.nodeId ? null : (
                      <Button perm="CLUSTER_MANAGE" kind="danger" onClick={() => eject(m)}>
                        Eject
                      </Button>
                    ),
                },
              ]}
            />
          )}
        </QueryView>
      </Card>
      <Card title="Singleton leases">
        <QueryView state={leases}>
          {(r) => (
            <DataTable
              label="Leases"
              rows={r.leases}
              rowKey={(l) => l.name}
              empty="No lease is held."
              columns={[
                { title: "Lease", render: (l) => l.name },
                { title: "Holder", render: (l) => <code>{l.holder}</code> },
                { title: "Fencing token", className: "num", render: (l) => l.fencingToken },
                { title: "Expires", render: (l) => time(l.expiresAt) },
              ]}
            />
          )}
        </QueryView>
      </Card>
      <ControllerJoinTokens members={members.data?.members ?? []} />
      <Can perm="CLUSTER_MANAGE">
        <Recover members={members.data?.members ?? []} self={cluster.data?.nodeId ?? ""} clusterId={cluster.data?.clusterId ?? ""} />
      </Can>
      {confirmDialog}
      {promptDialog}
    </>
  );
}

function ControllerJoinTokens({ members }: { members: Member[] }) {
  const { api, toast } = useApp();
  const tokens = useQuery<{ tokens: JoinToken[] }>("cluster/join-tokens", { load: () => api.get("cluster/join-tokens") });
  const [open, setOpen] = useState(false);
  const [addrs, setAddrs] = useState("");
  const [ttl, setTtl] = useState("86400");
  const [label, setLabel] = useState("");
  const [secret, setSecret] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  return (
    <Card
      title="Controller join tokens"
      actions={
        <Button
          perm="CLUSTER_MANAGE"
          kind="primary"
          onClick={() => {
            setAddrs(
              members
                .map((m) => m.gRPCAddr)
                .filter(Boolean)
                .join(", "),
            );
            setOpen(true);
          }}
        >
          Create join token
        </Button>
      }
    >
      <QueryView state={tokens}>
        {(r) => (
          <DataTable
            label="Controller join tokens"
            rows={r.tokens}
            rowKey={(t) => t.jti}
            empty="No token."
            columns={[
              { title: "Token id", render: (t) => <code>{t.jti}</code> },
              { title: "Label", render: (t) => t.label || "–" },
              { title: "Status", render: (t) => <StateBadge state={t.status} /> },
              { title: "Expires", render: (t) => time(t.expiresAt) },
              {
                title: "",
                render: (t) =>
                  t.status === "ACTIVE" ? (
                    <Button
                      perm="CLUSTER_MANAGE"
                      kind="danger"
                      onClick={() =>
                        api.delete(`cluster/join-tokens/${encodeURIComponent(t.jti)}`).then(
                          () => tokens.refresh(),
                          (err: unknown) => toast(errorMessage(err), "error"),
                        )
                      }
                    >
                      Revoke
                    </Button>
                  ) : null,
              },
            ]}
          />
        )}
      </QueryView>
      <Dialog open={open} title="Create a controller join token" onClose={() => setOpen(false)}>
        <form
          onSubmit={async (e) => {
            e.preventDefault();
            setError(null);
            try {
              const joinAddrs = addrs
                .split(/[\s,]+/)
                .map((a) => a.trim())
                .filter(Boolean);
              const created = await api.post<{ token: string }>("cluster/join-tokens", { joinAddrs, ttlSeconds: Number(ttl), label: label || undefined });
              setOpen(false);
              setSecret(created.token);
              tokens.refresh();
            } catch (err) {
              setError(errorMessage(err));
            }
          }}
        >
          <Field label="Join addresses" hint="gRPC addresses (host:port, the controller gRPC port) of existing members">
            <input required value={addrs} onInput={(e) => setAddrs(e.currentTarget.value)} />
          </Field>
          <Field label="Valid for (seconds)" hint="at most 30 days">
            <input type="number" min="1" value={ttl} onInput={(e) => setTtl(e.currentTarget.value)} />
          </Field>
          <Field label="Label">
            <input value={label} onInput={(e) => setLabel(e.currentTarget.value)} />
          </Field>
          {error ? <p class="error-box">{error}</p> : null}
          <div class="actions end">
            <button type="submit" class="btn btn-primary">
              Create
            </button>
          </div>
        </form>
      </Dialog>
      <SecretOnce label="Controller join token" value={secret} onClose={() => setSecret(null)} />
    </Card>
  );
}

/** The guided recover form: when most members are gone for good, eject them so the survivors form a quorum. */
function Recover({ members, self, clusterId }: { members: Member[]; self: string; clusterId: string }) {
  const { api, toast } = useApp();
  const [chosen, setChosen] = useState<string[]>([]);
  const [reason, setReason] = useState("");
  const [confirm, confirmDialog] = useConfirm();
  const others = members.filter((m) => m.nodeId !== self);
  const survivors = members.length - chosen.length;
  return (
    <Card title="Recover a lost quorum">
      <details>
        <summary>When to use this</summary>
        <ol>
          <li>Only when a majority of the controllers is gone for good (hosts lost, disks gone): the cluster then has no leader and cannot change anything.</li>
          <li>Run it on a surviving controller (this page talks to {self || "this controller"}).</li>
          <li>
            Choose every member that is lost. The survivors must be able to reach each other; the controller checks that the chosen ones do not answer before it
            ejects them.
          </li>
          <li>Afterwards, add controllers again with join tokens to get back to an odd number of at least three.</li>
          <li>
            If this controller is the only survivor, nothing can be committed: follow the single-survivor procedure (`cloudctl cluster recover
            --i-have-only-survivor`).
          </li>
        </ol>
      </details>
      <form
        onSubmit={async (e) => {
          e.preventDefault();
          if (
            !(await confirm({
              title: "Recover the cluster",
              message: `Eject ${chosen.join(", ")} for good? ${survivors} member(s) will remain.`,
              typed: clusterId,
              danger: true,
              confirmLabel: "Recover",
            }))
          )
            return;
          try {
            const r = await api.post<{ ejected: string[]; memberCount: number }>("cluster/recover", { eject: chosen, reason: reason || undefined });
            toast(`Recovered: ejected ${r.ejected.join(", ")}; ${r.memberCount} member(s)`, "success");
            setChosen([]);
          } catch (err) {
            toast(`Recover: ${errorMessage(err)}`, "error");
          }
        }}
      >
        <fieldset>
          <legend>Lost members</legend>
          {others.length === 0 ? <p class="muted">No other member.</p> : null}
          {others.map((m) => (
            <label class="check" key={m.nodeId}>
              <input
                type="checkbox"
                checked={chosen.includes(m.nodeId)}
                onChange={(e) => setChosen(e.currentTarget.checked ? [...chosen, m.nodeId] : chosen.filter((id) => id !== m.nodeId))}
              />
              <code>{m.nodeId}</code> <span class="muted">{m.restAddr || m.raftAddr}</span>
            </label>
          ))}
        </fieldset>
        <Field label="Reason" hint="recorded in the audit log">
          <input value={reason} onInput={(e) => setReason(e.currentTarget.value)} />
        </Field>
        <button type="submit" class="btn btn-danger" disabled={chosen.length === 0}>
          Recover without {chosen.length} member(s)
        </button>
      </form>
      {confirmDialog}
    </Card>
  );
}

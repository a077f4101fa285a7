/**
 * Nodes: state and resources, drain / undrain, cordon / uncordon, certificate revoke, delete; and
 * the node join tokens (a created token is shown once).
 */
import { useState } from "preact/hooks";
import { ofTypes, useApp, useQuery } from "../lib/app-context.js";
import { NODES_KEY, nodesQuery } from "../lib/queries.js";
import { errorMessage } from "../lib/api.js";
import { ago, time } from "../lib/format.js";
import type { Node, NodeToken } from "../lib/types.js";
import { Badge, Button, Can, Card, Field, Meter, PageHeader, QueryView, StateBadge } from "../ui/controls.js";
import { Dialog, SecretOnce, useConfirm } from "../ui/dialog.js";
import { DataTable } from "../ui/table.js";

export function NodesPage() {
  const { api, toast } = useApp();
  const nodes = useQuery<Node[]>(NODES_KEY, nodesQuery(api));
  const [confirm, confirmDialog] = useConfirm();

  const act = async (node: Node, action: string, label: string) => {
    try {
      await api.post(`nodes/${encodeURIComponent(node.id)}/${action}`);
      toast(`${node.id}: ${label}`, "success");
      nodes.refresh();
    } catch (err) {
      toast(`${label}: ${errorMessage(err)}`, "error");
    }
  };
  const remove = async (node: Node) => {
    const ok = await confirm({
      title: `Delete node ${node.id}`,
      message: "The node's record is removed; its daemon must join again with a new token. A node with live instances is refused unless forced.",
      typed: node.id,
      danger: true,
      confirmLabel: "Delete node",
    });
    if (!ok) return;
    try {
      await api.delete(`nodes/${encodeURIComponent(node.id)}`);
      toast(`Node ${node.id} deleted`, "success");
      nodes.refresh();
    } catch (err) {
      toast(`Delete: ${errorMessage(err)}`, "error");
    }
  };
  const revoke = async (node: Node) => {
    const ok = await confirm({
      title: `Revoke the certificate of ${node.id}`,
      message: "Its daemon can no longer connect until the revocation is lifted.",
      danger: true,
      confirmLabel: "Revoke",
    });
    if (ok) await act(node, "revoke-cert", "certificate revoked");
  };

  return (
    <>
      <PageHeader title="Nodes" />
      <QueryView state={nodes}>
        {(list) => (
          <DataTable
            label="Nodes"
            rows={list}
            rowKey={(n) => n.id}
            empty="No node has joined yet. Create a join token below and start a daemon with it."
            columns={[
              {
                title: "Node",
                render: (n) => (
                  <>
                    <strong>{n.id}</strong>
                    <div class="muted">{n.host}</div>
                  </>
                ),
              },
              {
                title: "State",
                render: (n) => (
                  <span data-node-state={n.state}>
                    <StateBadge state={n.state} /> {n.cordoned ? <Badge tone="warn">cordoned</Badge> : null}{" "}
                    {n.certificateRevoked ? <Badge tone="bad">certificate revoked</Badge> : null}
                  </span>
                ),
              },
              {
                title: "Memory",
                render: (n) => (
                  <>
                    <Meter used={n.usedMemoryMb} total={n.totalMemoryMb} label={`${n.usedMemoryMb} of ${n.totalMemoryMb} MB`} /> {n.usedMemoryMb}/
                    {n.totalMemoryMb} MB
                  </>
                ),
              },
              { title: "CPU", className: "num", render: (n) => `${Math.round(n.cpuUsage * 100)}%` },
              { title: "Instances", className: "num", render: (n) => n.instanceCount },
              { title: "Heartbeat", render: (n) => ago(n.lastHeartbeatAt) },
              { title: "Version", render: (n) => n.version ?? "–" },
              {
                title: "Actions",
                render: (n) => (
                  <div class="actions">
                    {n.state === "DRAINING" ? (
                      <Button perm="nodes.manage" onClick={() => act(n, "undrain", "undrained")}>
                        Undrain
                      </Button>
                    ) : (
                      <Button perm="nodes.manage" onClick={() => act(n, "drain", "draining")}>
                        Drain
                      </Button>
                    )}
                    {n.cordoned ? (
                      <Button perm="nodes.manage" onClick={() => act(n, "uncordon", "uncordoned")}>
                        Uncordon
                      </Button>
                    ) : (
                      <Button perm="nodes.manage" onClick={() => act(n, "cordon", "cordoned")}>
                        Cordon
                      </Button>
                    )}
                    {n.certificateRevoked ? (
                      <Button perm="nodes.manage" onClick={() => act(n, "unrevoke-cert", "revocation lifted")}>
                        Lift revocation
                      </Button>
                    ) : (
                      <Button perm="nodes.manage" kind="danger" onClick={() => revoke(n)}>
                        Revoke certificate
                      </Button>
                    )}
                    <Button perm="nodes.manage" kind="danger" onClick={() => remove(n)}>
                      Delete
                    </Button>
                  </div>
                ),
              },
            ]}
          />
        )}
      </QueryView>
      <Can perm="tokens.manage">
        <JoinTokens />
      </Can>
      {confirmDialog}
    </>
  );
}

function JoinTokens() {
  const { api, toast } = useApp();
  const tokens = useQuery<NodeToken[]>("admin/tokens", { load: () => api.get("admin/tokens"), watch: ofTypes("NODE_CONNECTED") });
  const [creating, setCreating] = useState(false);
  const [nodeId, setNodeId] = useState("");
  const [ttl, setTtl] = useState("1h");
  const [secret, setSecret] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  return (
    <Card
      title="Node join tokens"
      actions={
        <Button kind="primary" onClick={() => setCreating(true)}>
          Create join token
        </Button>
      }
    >
      <QueryView state={tokens}>
        {(list) => (
          <DataTable
            label="Node join tokens"
            rows={list}
            rowKey={(t) => t.id}
            empty="No token."
            columns={[
              { title: "Id", render: (t) => <code>{t.id}</code> },
              { title: "For node", render: (t) => t.nodeId ?? "any" },
              { title: "Status", render: (t) => <StateBadge state={t.status} /> },
              { title: "Expires", render: (t) => time(t.expiresAt) },
              { title: "Created by", render: (t) => t.createdBy },
              {
                title: "",
                render: (t) =>
                  t.status === "ACTIVE" ? (
                    <Button
                      kind="danger"
                      onClick={async () => {
                        try {
                          await api.delete(`admin/tokens/${encodeURIComponent(t.id)}`);
                          tokens.refresh();
                        } catch (err) {
                          toast(`Revoke: ${errorMessage(err)}`, "error");
                        }
                      }}
                    >
                      Revoke
                    </Button>
                  ) : null,
              },
            ]}
          />
        )}
      </QueryView>
      <Dialog open={creating} title="Create a node join token" onClose={() => setCreating(false)}>
        <form
          onSubmit={async (e) => {
            e.preventDefault();
            setError(null);
            try {
              const created = await api.post<NodeToken>("admin/tokens", { nodeId: nodeId || null, ttl });
              setCreating(false);
              setSecret(created.token ?? "");
              tokens.refresh();
            } catch (err) {
              setError(errorMessage(err));
            }
          }}
        >
          <Field label="Node id" hint="optional: the token then joins only this node">
            <input value={nodeId} onInput={(e) => setNodeId(e.currentTarget.value)} />
          </Field>
          <Field label="Valid for" hint="e.g. 30m, 1h, 24h">
            <input value={ttl} onInput={(e) => setTtl(e.currentTarget.value)} required />
          </Field>
          {error ? <p class="error-box">{error}</p> : null}
          <div class="actions end">
            <button type="submit" class="btn btn-primary">
              Create
            </button>
          </div>
        </form>
      </Dialog>
      <SecretOnce label="Node join token" value={secret} onClose={() => setSecret(null)} />
    </Card>
  );
}

/**
 * `cloudctl node list|info|drain|undrain|cordon|uncordon|revoke-cert|unrevoke-cert|delete` and
 * `cloudctl token create|list|revoke`.
 */
import type { Command } from "commander";
import { listOf, segment } from "../http-client.js";
import { ID_KINDS, idToConfirm, withIdPrefix } from "../id-prefix.js";
import { display } from "../render.js";
import type { RuntimeFactory } from "../runtime.js";

type NodeRecord = Record<string, unknown> & { id?: string; state?: string };

/**
 * A node field for people: a usage ratio (`cpuUsage`, 0 to 1) as a percentage, other fractions
 * with two decimals, megabyte counts with their unit; everything else as it is.
 */
export function formatNodeField(key: string, value: unknown): string {
  if (typeof value !== "number" || !Number.isFinite(value)) return display(value);
  if (/usage$/i.test(key) && value >= 0 && value <= 1) return `${(value * 100).toFixed(1)} %`;
  if (/Mb$/.test(key)) return `${Math.round(value)} MB`;
  return Number.isInteger(value) ? String(value) : value.toFixed(2);
}

/** Columns shown after ID and STATE when the controller's node records carry them. */
const optionalNodeColumns = ["host", "address", "version", "instanceCount", "memoryMb", "cordoned", "certificateRevoked"];

/** Node actions that POST to `/api/v1/nodes/{id}/<action>`, with their help and success texts. */
const nodeActions = [
  { action: "drain", help: "stop placing new instances on a node (running ones continue)", done: "draining" },
  { action: "undrain", help: "resume placement on a drained node", done: "online" },
  { action: "cordon", help: "exclude a node from placement (state and running instances untouched)", done: "cordoned" },
  { action: "uncordon", help: "let placement use a cordoned node again", done: "uncordoned" },
  { action: "revoke-cert", help: "revoke a node's certificate: its daemon is disconnected and cannot reconnect", done: "certificate revoked" },
  { action: "unrevoke-cert", help: "lift a certificate revocation: the node's daemon may connect again", done: "certificate no longer revoked" },
] as const;

/** Registers node and token commands. */
export function registerNodeCommands(program: Command, runtime: RuntimeFactory): void {
  const node = program.command("node").description("inspect, drain, cordon and remove worker nodes");

  node
    .command("list")
    .alias("ls")
    .description("list nodes")
    .option("--state <state>", "ONLINE, DRAINING, UNREACHABLE or OFFLINE")
    .action(async (opts: { state?: string }, cmd: Command) => {
      const rt = runtime(cmd);
      const response = await rt.client().get("/api/v1/nodes", { state: opts.state?.toUpperCase() });
      if (rt.json) return rt.out.raw(response.raw);
      const nodes = listOf<NodeRecord>(response.data);
      const extra = optionalNodeColumns.filter((key) => nodes.some((n) => n[key] !== undefined));
      const o = rt.out;
      o.table(
        ["ID", "STATE", ...extra.map((k) => k.replace(/([A-Z])/g, " $1").toUpperCase())],
        nodes.map((n) => [o.accent(display(n.id)), o.state(display(n.state)), ...extra.map((k) => formatNodeField(k, n[k]))]),
      );
    });

  node
    .command("info <id>")
    .description("show one node")
    .action(async (given: string, _opts, cmd: Command) => {
      const rt = runtime(cmd);
      const client = rt.client();
      const { result: response } = await withIdPrefix(client, ID_KINDS.node, given, (id) => client.get<NodeRecord>(`/api/v1/nodes/${segment(id)}`));
      if (rt.json) return rt.out.raw(response.raw);
      rt.out.fields(Object.entries(response.data ?? {}).map(([key, value]) => [key, formatNodeField(key, value)]));
    });

  for (const { action, help, done } of nodeActions) {
    node
      .command(`${action} <id>`)
      .description(help)
      .action(async (given: string, _opts, cmd: Command) => {
        const rt = runtime(cmd);
        const client = rt.client();
        const { id, result: response } = await withIdPrefix(client, ID_KINDS.node, given, (id) =>
          client.post<NodeRecord>(`/api/v1/nodes/${segment(id)}/${action}`),
        );
        if (rt.json) return rt.out.raw(response.raw);
        rt.out.success(`node ${rt.out.accent(id)} ${done}${response.data?.state ? ` (${display(response.data.state)})` : ""}`);
      });
  }

  node
    .command("delete <id>")
    .alias("rm")
    .description("delete an UNREACHABLE or OFFLINE node's record (asks first)")
    .option("--force", "delete even while instances on the node are live")
    .option("-y, --yes", "do not ask for confirmation")
    .action(async (given: string, opts: { force?: boolean; yes?: boolean }, cmd: Command) => {
      const rt = runtime(cmd);
      const client = rt.client();
      const asked = await idToConfirm(client, ID_KINDS.node, given, !opts.yes && rt.prompter.interactive);
      const live = opts.force ? " even if instances on it are live" : "";
      const reconnect = "A daemon with a valid certificate registers it again when it connects.";
      await rt.confirm(`Delete node "${asked}"${live}? ${reconnect}`, opts.yes);
      const { id, result: response } = await withIdPrefix(client, ID_KINDS.node, asked, (id) =>
        client.delete(`/api/v1/nodes/${segment(id)}`, { force: opts.force ? true : undefined }),
      );
      if (rt.json) return rt.out.raw(response.raw || "{}");
      rt.out.success(`deleted node ${rt.out.accent(id)}`);
    });

  const token = program.command("token").description("node join tokens (daemon credentials)");

  token
    .command("create")
    .description("create a node join token (the value is shown once)")
    .option("--node <id>", "bind the token to a node id")
    .option("--ttl <duration>", "time to live, e.g. 30m, 1h, 7d", "1h")
    .action(async (opts: { node?: string; ttl: string }, cmd: Command) => {
      const rt = runtime(cmd);
      // The duration text is sent as given (e.g. 30m, 1h, 7d, 1h30m); the controller validates it.
      const body: Record<string, unknown> = { ttl: opts.ttl.trim() };
      if (opts.node) body.nodeId = opts.node;
      const response = await rt.client().post<Record<string, unknown>>("/api/v1/admin/tokens", body);
      if (rt.json) return rt.out.raw(response.raw);
      rt.out.fields(Object.entries(response.data ?? {}));
      rt.out.note("store the token now: it is not shown again");
    });

  token
    .command("list")
    .alias("ls")
    .description("list node join tokens")
    .action(async (_opts, cmd: Command) => {
      const rt = runtime(cmd);
      const response = await rt.client().get("/api/v1/admin/tokens");
      if (rt.json) return rt.out.raw(response.raw);
      const tokens = listOf<Record<string, unknown>>(response.data, "tokens");
      const keys = [...new Set(tokens.flatMap((t) => Object.keys(t)))].filter((k) => k !== "token");
      rt.out.table(
        keys.map((k) => k.replace(/([A-Z])/g, " $1").toUpperCase()),
        tokens.map((t) => keys.map((k) => display(t[k]))),
      );
    });

  token
    .command("revoke <id>")
    .description("revoke a node join token")
    .action(async (id: string, _opts, cmd: Command) => {
      const rt = runtime(cmd);
      const response = await rt.client().delete(`/api/v1/admin/tokens/${segment(id)}`);
      if (rt.json) return rt.out.raw(response.raw || "{}");
      rt.out.success(`revoked token ${rt.out.accent(id)}`);
    });
}

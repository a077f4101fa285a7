/** `cloudctl node list|info|drain|undrain` and `cloudctl token create|list|revoke`. */
import type { Command } from "commander";
import { listOf, segment } from "../http-client.js";
import { display } from "../render.js";
import type { RuntimeFactory } from "../runtime.js";

type NodeRecord = Record<string, unknown> & { id?: string; state?: string };

/** Columns shown after ID and STATE when the controller's node records carry them. */
const optionalNodeColumns = ["host", "address", "version", "instanceCount", "memoryMb"];

/** Registers node and token commands. */
export function registerNodeCommands(program: Command, runtime: RuntimeFactory): void {
  const node = program.command("node").description("inspect and drain worker nodes");

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
        nodes.map((n) => [o.accent(display(n.id)), o.state(display(n.state)), ...extra.map((k) => display(n[k]))]),
      );
    });

  node
    .command("info <id>")
    .description("show one node")
    .action(async (id: string, _opts, cmd: Command) => {
      const rt = runtime(cmd);
      const response = await rt.client().get<NodeRecord>(`/api/v1/nodes/${segment(id)}`);
      if (rt.json) return rt.out.raw(response.raw);
      rt.out.fields(Object.entries(response.data ?? {}));
    });

  for (const action of ["drain", "undrain"] as const) {
    node
      .command(`${action} <id>`)
      .description(action === "drain" ? "stop placing new instances on a node (running ones continue)" : "resume placement on a drained node")
      .action(async (id: string, _opts, cmd: Command) => {
        const rt = runtime(cmd);
        const response = await rt.client().post<NodeRecord>(`/api/v1/nodes/${segment(id)}/${action}`);
        if (rt.json) return rt.out.raw(response.raw);
        rt.out.success(`node ${rt.out.accent(id)} ${action === "drain" ? "draining" : "online"}${response.data?.state ? ` (${display(response.data.state)})` : ""}`);
      });
  }

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
      rt.out.table(keys.map((k) => k.replace(/([A-Z])/g, " $1").toUpperCase()), tokens.map((t) => keys.map((k) => display(t[k]))));
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

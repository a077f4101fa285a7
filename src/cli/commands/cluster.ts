/** `cloudctl cluster ...`: controller membership, join tokens, seed rotation and recovery. */
import type { Command } from "commander";
import { CliError } from "../exit-codes.js";
import { listOf, segment } from "../http-client.js";
import { collect, commaList, parseCount } from "../options.js";
import { display } from "../render.js";
import type { Runtime, RuntimeFactory } from "../runtime.js";
import { registerClusterConfigCommands } from "./cluster-config.js";

/** Default lifetime of a controller join token (24 h); the controller caps it at 30 days. */
export const joinTokenTtlDefaultSeconds = 86_400;

/** A member as `GET /api/v1/cluster/members` lists it. */
interface Member {
  nodeId?: string;
  raftAddr?: string;
  restAddr?: string;
  gRPCAddr?: string;
  label?: string;
  joinedAt?: string | null;
  role?: string;
  leader?: boolean;
}

/** The ROLE column: `leader`, else the Raft role (voter, learner). */
export function memberRole(member: Member): string {
  return member.leader ? "leader" : display(member.role);
}

interface JoinTokenItem {
  jti?: string;
  label?: string;
  status?: string;
  createdAt?: string;
  expiresAt?: string;
}

/** The offline single-survivor procedure printed by `cluster recover --i-have-only-survivor`. */
export const singleSurvivorProcedure = `Single-survivor reset (offline; this command changed nothing)

Use this only when every other controller is permanently lost and this controller is the only one
left: with no quorum the cluster cannot commit anything, so recover --eject cannot run either.

 1. Make sure the lost controllers can never come back with their old state: power them off or
    delete their raft.dataDir. Two controllers that both believe they lead split the cluster.
 2. Take a backup first (cloudctl backup create, or a database dump), then stop the survivor.
 3. On the survivor move raft.dataDir (default data/raft) aside, e.g. to data/raft.lost-<date>;
    keep it until the cluster is healthy again.
 4. Remove cluster.id from controller.yml: the restarted controller forms a fresh single-member
    cluster with a new cluster id and a new certificate authority. Groups, templates, users and
    the audit log live in the shared database and are kept.
 5. Start the controller and wait for GET /api/v1/system/ready to answer READY.
 6. Daemons hold certificates of the old authority: create node tokens (cloudctl token create)
    and re-join each node.
 7. Grow back to an odd member count: cloudctl cluster join-token create --join-addr <host:9090>
    and start each new controller with the token (one at a time, waiting for readiness).`;

/** Asks unless `--yes`; a No or a stdin that is not a terminal ends the command with exit 6. */
async function confirmUnlessYes(rt: Runtime, yes: boolean | undefined, question: string): Promise<boolean> {
  await rt.confirm(question, yes);
  return true;
}

/** Registers the cluster commands. */
export function registerClusterCommands(program: Command, runtime: RuntimeFactory): void {
  const cluster = program.command("cluster").description("controller cluster: members, join tokens, seed, recovery");

  cluster
    .command("status")
    .description("cluster identity, member count and leader")
    .action(async (_opts, cmd: Command) => {
      const rt = runtime(cmd);
      const response = await rt.client().get<Record<string, unknown>>("/api/v1/cluster");
      if (rt.json) return rt.out.raw(response.raw);
      const c = response.data ?? {};
      rt.out.fields([
        ["Cluster", c.clusterId],
        ["Members", c.memberCount],
        ["Leader", c.leaderId ?? "none known"],
        ["Answered by", c.nodeId],
        ["Config version", c.activeConfigVersion ?? "none"],
        ["Created", c.createdAt],
      ]);
    });

  cluster
    .command("members")
    .description("list the controllers in the cluster")
    .action(async (_opts, cmd: Command) => {
      const rt = runtime(cmd);
      const response = await rt.client().get("/api/v1/cluster/members");
      if (rt.json) return rt.out.raw(response.raw);
      const o = rt.out;
      o.table(
        ["NODE ID", "ROLE", "LABEL", "RAFT", "REST", "GRPC", "JOINED"],
        listOf<Member>(response.data, "members").map((m) => [
          o.accent(display(m.nodeId)),
          memberRole(m),
          display(m.label),
          display(m.raftAddr),
          display(m.restAddr),
          display(m.gRPCAddr),
          display(m.joinedAt),
        ]),
      );
    });

  cluster
    .command("eject <nodeId>")
    .description("forcibly remove a member (from a surviving controller)")
    .option("-y, --yes", "do not ask for confirmation")
    .option("--reason <text>", "reason recorded with the ejection")
    .action(async (nodeId: string, opts: { yes?: boolean; reason?: string }, cmd: Command) => {
      const rt = runtime(cmd);
      const client = rt.client();
      if (!(await confirmUnlessYes(rt, opts.yes, `Eject controller "${nodeId}" from the cluster?`))) return;
      const response = await client.delete(`/api/v1/cluster/members/${segment(nodeId)}`, { reason: opts.reason });
      if (rt.json) return rt.out.raw(response.raw || "{}");
      rt.out.success(`ejected ${rt.out.accent(nodeId)}`);
    });

  cluster
    .command("leave")
    .description("make the targeted controller leave the cluster gracefully (it then shuts down)")
    .option("-y, --yes", "do not ask for confirmation")
    .action(async (opts: { yes?: boolean }, cmd: Command) => {
      const rt = runtime(cmd);
      const client = rt.client();
      if (!(await confirmUnlessYes(rt, opts.yes, `Make the controller at ${client.baseUrl} leave the cluster and shut down?`))) return;
      const response = await client.post<{ nodeId?: string; clusterId?: string }>("/api/v1/cluster/leave");
      if (rt.json) return rt.out.raw(response.raw);
      rt.out.success(`${display(response.data?.nodeId)} left cluster ${display(response.data?.clusterId)}`);
    });

  const joinToken = cluster.command("join-token").description("single-use tokens for adding controllers");

  joinToken
    .command("create")
    .description("issue a join token (the value is shown once)")
    .option("--join-addr <host:port>", "gRPC address of an existing member (repeatable, at least one)", collect, [])
    .option("--ttl-seconds <n>", "lifetime in seconds (at most 30 days)", parseCount, joinTokenTtlDefaultSeconds)
    .option("--label <text>", "label shown in the token list")
    .action(async (opts: { joinAddr: string[]; ttlSeconds: number; label?: string }, cmd: Command) => {
      const rt = runtime(cmd);
      if (opts.joinAddr.length === 0) throw new CliError("at least one --join-addr <host:port> is required (the controllers' gRPC port, default 9090)");
      const body: Record<string, unknown> = { joinAddrs: opts.joinAddr, ttlSeconds: opts.ttlSeconds };
      if (opts.label !== undefined) body.label = opts.label;
      const response = await rt.client().post<{ jti?: string; token?: string; expiresAt?: string }>("/api/v1/cluster/join-tokens", body);
      if (rt.json) return rt.out.raw(response.raw);
      rt.out.fields([
        ["JTI", response.data?.jti],
        ["Expires", response.data?.expiresAt],
        ["Token", response.data?.token],
      ]);
      rt.out.note("store the token now: it is not shown again");
    });

  joinToken
    .command("list")
    .alias("ls")
    .description("list join tokens (values are never listed)")
    .action(async (_opts, cmd: Command) => {
      const rt = runtime(cmd);
      const response = await rt.client().get("/api/v1/cluster/join-tokens");
      if (rt.json) return rt.out.raw(response.raw);
      const o = rt.out;
      o.table(
        ["JTI", "LABEL", "STATUS", "CREATED", "EXPIRES"],
        listOf<JoinTokenItem>(response.data, "tokens").map((t) => [
          o.accent(display(t.jti)),
          display(t.label),
          o.state(display(t.status)),
          display(t.createdAt),
          display(t.expiresAt),
        ]),
      );
    });

  joinToken
    .command("revoke <jti>")
    .description("revoke a join token")
    .action(async (jti: string, _opts, cmd: Command) => {
      const rt = runtime(cmd);
      const response = await rt.client().delete(`/api/v1/cluster/join-tokens/${segment(jti)}`);
      if (rt.json) return rt.out.raw(response.raw || "{}");
      rt.out.success(`revoked join token ${rt.out.accent(jti)}`);
    });

  cluster
    .command("seed")
    .description("cluster seed secret")
    .command("rotate")
    .description("rotate the seed secret (every outstanding join token becomes invalid)")
    .option("-y, --yes", "do not ask for confirmation")
    .action(async (opts: { yes?: boolean }, cmd: Command) => {
      const rt = runtime(cmd);
      const client = rt.client();
      if (!(await confirmUnlessYes(rt, opts.yes, "Rotate the cluster seed? Every outstanding join token becomes invalid."))) return;
      const response = await client.post<{ rotatedAt?: string }>("/api/v1/cluster/seed/rotate");
      if (rt.json) return rt.out.raw(response.raw);
      rt.out.success(`seed rotated${response.data?.rotatedAt ? ` at ${response.data.rotatedAt}` : ""}`);
    });

  cluster
    .command("recover")
    .description("after the quorum is lost: continue as the only member, removing the named lost members")
    .option("--eject <ids>", "comma-separated ids of every other member (all must be gone for good)")
    .option("--reason <text>", "reason recorded in the audit log")
    .option("-y, --yes", "do not ask for confirmation")
    .option("--i-have-only-survivor", "print the offline single-survivor reset procedure; changes nothing")
    .action(async (opts: { eject?: string; reason?: string; yes?: boolean; iHaveOnlySurvivor?: boolean }, cmd: Command) => {
      const rt = runtime(cmd);
      if (opts.iHaveOnlySurvivor) {
        rt.out.line(singleSurvivorProcedure);
        return;
      }
      const eject = commaList(opts.eject ?? "");
      if (eject.length === 0) throw new CliError("name the lost members with --eject <id,id,...> (or see --i-have-only-survivor)");
      const client = rt.client();
      if (!(await confirmUnlessYes(rt, opts.yes, `Force-remove ${eject.join(", ")} from the cluster? Only do this if they are gone for good.`))) return;
      const body: Record<string, unknown> = { eject };
      if (opts.reason !== undefined) body.reason = opts.reason;
      const response = await client.post<{ ejected?: string[]; memberCount?: number }>("/api/v1/cluster/recover", body);
      if (rt.json) return rt.out.raw(response.raw);
      const ejected = response.data?.ejected ?? eject;
      const count = response.data?.memberCount;
      rt.out.success(`recovered: ejected ${ejected.join(", ")}${typeof count === "number" ? `; ${count} member(s) now` : ""}`);
    });

  registerClusterConfigCommands(cluster, runtime);
}

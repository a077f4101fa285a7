// Several real controller processes forming one cluster: each on its own fixed ephemeral ports
// (HTTP, gRPC, Raft on 127.0.0.1, so a restart keeps its addresses), its own data directory, and a
// join token file when it joins. Every process is stopped and every directory removed by `close`.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ephemeralPort } from "../support/postgres-server.js";
import { startTestController, type ConfigOverrides, type TestController } from "../support/controller.js";

/** Bound of one controller start (a joining one waits for its promotion too). */
export const memberStartTimeoutMs = 120_000;

export interface Reply {
  status: number;
  json: any;
  text: string;
}

export interface ClusterMemberProcess {
  name: string;
  dataDir: string;
  httpPort: number;
  grpcPort: number;
  raftPort: number;
  grpcAddr: string;
  process: TestController | null;
  call(method: string, path: string, body?: unknown): Promise<Reply>;
  tokenFile(): string;
  configText(): string;
}

export class ClusterHarness {
  readonly members: ClusterMemberProcess[] = [];
  private readonly root = mkdtempSync(join(tmpdir(), "cloud-cluster-e2e-"));

  constructor(private readonly overrides: ConfigOverrides = {}) {}

  /** Starts a controller; with `joinToken` it joins through the token file. */
  async start(name: string, options: { joinToken?: string; overrides?: ConfigOverrides } = {}): Promise<ClusterMemberProcess> {
    const member = await this.prepare(name);
    if (options.joinToken !== undefined) writeFileSync(member.tokenFile(), `${options.joinToken}\n`);
    await this.launch(member, options.overrides);
    return member;
  }

  /** Prepares a member's ports and directory without starting it. */
  async prepare(name: string): Promise<ClusterMemberProcess> {
    const dataDir = join(this.root, name);
    mkdirSync(dataDir, { recursive: true });
    const [httpPort, grpcPort, raftPort] = [await ephemeralPort(), await ephemeralPort(), await ephemeralPort()];
    const member: ClusterMemberProcess = {
      name,
      dataDir,
      httpPort,
      grpcPort,
      raftPort,
      grpcAddr: `127.0.0.1:${grpcPort}`,
      process: null,
      call: async (method, path, body) => {
        const controller = member.process;
        if (!controller) throw new Error(`${name} is not running`);
        const res = await fetch(controller.url + path, {
          method,
          headers: { authorization: `Bearer ${controller.adminToken}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        const text = await res.text();
        return { status: res.status, text, json: text ? JSON.parse(text) : undefined };
      },
      tokenFile: () => join(dataDir, "cluster-join.token"),
      configText: () => readFileSync(join(dataDir, "controller.test.yml"), "utf8"),
    };
    this.members.push(member);
    return member;
  }

  /** Starts (or starts again) a prepared member's controller process. */
  async launch(member: ClusterMemberProcess, overrides: ConfigOverrides = {}): Promise<void> {
    member.process = await startTestController(
      {
        ...this.overrides,
        ...overrides,
        http: { host: "127.0.0.1", port: member.httpPort },
        grpc: { port: member.grpcPort },
        raft: { host: "127.0.0.1", port: member.raftPort, dataDir: join(member.dataDir, "raft") },
      },
      { dataDir: member.dataDir, startTimeoutMs: memberStartTimeoutMs },
    );
  }

  /** Starts three members: `a` founds the cluster, `b` joins through `a`, `c` through `a` and `b`. */
  async startThree(overrides?: ConfigOverrides): Promise<[ClusterMemberProcess, ClusterMemberProcess, ClusterMemberProcess]> {
    const a = await this.start("a", { overrides });
    const b = await this.start("b", { joinToken: await this.joinToken(a, [a]), overrides });
    const c = await this.start("c", { joinToken: await this.joinToken(b, [a, b]), overrides });
    return [a, b, c];
  }

  /** Issues a join token on `issuer` carrying the gRPC addresses of `through`. */
  async joinToken(issuer: ClusterMemberProcess, through: readonly ClusterMemberProcess[], label = ""): Promise<string> {
    const reply = await issuer.call("POST", "/api/v1/cluster/join-tokens", { joinAddrs: through.map((m) => m.grpcAddr), label });
    if (reply.status !== 201) throw new Error(`join token: ${reply.status} ${reply.text}`);
    return reply.json.token as string;
  }

  async kill9(member: ClusterMemberProcess): Promise<void> {
    await member.process?.kill9();
  }

  async stop(member: ClusterMemberProcess): Promise<void> {
    await member.process?.stop();
  }

  tokenFilePresent(member: ClusterMemberProcess): boolean {
    return existsSync(member.tokenFile());
  }

  async close(): Promise<void> {
    await Promise.all(this.members.map((m) => m.process?.stop().catch(() => undefined)));
    rmSync(this.root, { recursive: true, force: true });
  }
}

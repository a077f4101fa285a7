// A stand-in controller for daemon tests: a minimal NodeGateway server over mutual TLS (cluster CA,
// controller certificate) on an ephemeral loopback port that answers hello with hello_ack, records
// every daemon message per session, sends commands and awaits their results; a tiny HTTP server
// with the template manifest and blob routes; and `cloud-daemon` as a child process with a node
// identity issued by the same CA written into its dataDir.
import { spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { stringify as toYaml } from "yaml";
import { createClusterCa, issueNodeCertificate, type ClusterCa } from "../../src/cluster/identity/ca.js";
import { IDENTITY_FILES } from "../../src/daemon/gateway-client.js";
import { CONTROLLER_CERTIFICATE_NAME } from "../../src/wire/certificate-names.js";
import {
  controllerMessage,
  loadNodeGateway,
  type CommandPayloads,
  type CommandResult,
  type ControllerMessage,
  type ControllerPayloads,
  type DaemonMessage,
  type DaemonPayloads,
  type InstanceSpec,
} from "../../src/wire/daemon-proto.js";
import { DIR_MODE, FILE_MODE } from "../../src/templates/manifest.js";

const ROOT_DIR = join(import.meta.dirname, "..", "..");
/** How long a command may wait for its result. */
const COMMAND_TIMEOUT_MS = 15_000;
/** How long a daemon child gets to exit after SIGTERM before SIGKILL. */
const CHILD_STOP_TIMEOUT_MS = 15_000;

/** Environment that keeps the simulated server on loopback and quick to stop. */
export const SIM_WIRE_ENV = { CLOUD_SIM_BIND_HOST: "127.0.0.1", CLOUD_SIM_TICK_INTERVAL_MS: "0", CLOUD_SIM_STOP_DELAY_MS: "50" };

/** One Connect stream as the fake controller saw it. */
export interface FakeSession {
  id: string;
  messages: DaemonMessage[];
  call: grpc.ServerDuplexStream<DaemonMessage, ControllerMessage>;
  ended: boolean;
}

export interface FakeControllerOptions {
  /** hello_ack.http_port. */
  httpPort: number;
  /** hello_ack.api_credential.token. */
  apiToken: string;
}

/** A NodeGateway server that acknowledges every hello and lets the test drive the session. */
export class FakeController {
  readonly sessions: FakeSession[] = [];
  /** While true, new streams are ended at once, before any hello_ack. */
  refuseConnections = false;
  /** hello_ack.http_port of the next sessions (a test moves the HTTP side between sessions). */
  httpPort: number;
  refusedConnections = 0;
  private commandCounter = 0;
  private readonly pending = new Map<string, (result: CommandResult) => void>();

  private constructor(
    readonly ca: ClusterCa,
    private readonly server: grpc.Server,
    readonly address: string,
    private readonly options: FakeControllerOptions,
  ) {
    this.httpPort = options.httpPort;
  }

  static async start(options: FakeControllerOptions): Promise<FakeController> {
    const ca = createClusterCa();
    const serverCert = issueNodeCertificate(ca, { nodeId: CONTROLLER_CERTIFICATE_NAME });
    const server = new grpc.Server();
    let fake: FakeController | null = null;
    server.addService(loadNodeGateway().service, {
      Join: (_call: unknown, callback: grpc.sendUnaryData<unknown>) => callback({ code: grpc.status.UNIMPLEMENTED }),
      Connect: (call: grpc.ServerDuplexStream<DaemonMessage, ControllerMessage>) => fake!.connect(call),
    });
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync(
        "127.0.0.1:0",
        grpc.ServerCredentials.createSsl(
          Buffer.from(ca.certPem),
          [{ private_key: Buffer.from(serverCert.keyPem), cert_chain: Buffer.from(serverCert.certPem) }],
          true,
        ),
        (err, p) => (err ? reject(err) : resolve(p)),
      ),
    );
    fake = new FakeController(ca, server, `127.0.0.1:${port}`, options);
    return fake;
  }

  /** The newest session. */
  get current(): FakeSession | undefined {
    return this.sessions.at(-1);
  }

  /** Every message of `kind` across sessions (or in one session). */
  messagesOf<K extends keyof DaemonPayloads>(kind: K, session?: FakeSession): DaemonPayloads[K][] {
    const from = session ? [session] : this.sessions;
    return from.flatMap((s) => s.messages.filter((m) => m.payload === kind).map((m) => (m as unknown as Record<K, DaemonPayloads[K]>)[kind]));
  }

  /** Instance states reported for one instance, in order. */
  statesOf(instanceId: string): string[] {
    return this.messagesOf("instance_state")
      .filter((s) => s.instance_id === instanceId)
      .map((s) => s.state);
  }

  /** Console lines of one instance. */
  linesOf(instanceId: string): string[] {
    return this.messagesOf("console_line")
      .filter((l) => l.instance_id === instanceId)
      .map((l) => l.line);
  }

  /** Sends any controller message on the current session. */
  send<K extends keyof ControllerPayloads>(kind: K, body: ControllerPayloads[K]): void {
    const session = this.current;
    if (!session || session.ended) throw new Error("no open session");
    session.call.write(controllerMessage(kind, body));
  }

  /** Sends an instance command on the current session and resolves with its result. */
  async command<K extends keyof CommandPayloads>(kind: K, body: Omit<CommandPayloads[K], "command_id">): Promise<CommandResult> {
    this.commandCounter += 1;
    const commandId = `c${this.commandCounter}`;
    const result = new Promise<CommandResult>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(commandId);
        reject(new Error(`no result for ${kind} ${commandId}`));
      }, COMMAND_TIMEOUT_MS);
      this.pending.set(commandId, (r) => {
        clearTimeout(timer);
        resolve(r);
      });
    });
    this.send(kind, { ...body, command_id: commandId } as unknown as ControllerPayloads[K]);
    return await result;
  }

  /** Ends the current session from the controller's side (the daemon reconnects). */
  dropSession(): void {
    const session = this.current;
    if (!session || session.ended) return;
    session.ended = true;
    session.call.end();
  }

  async stop(): Promise<void> {
    for (const session of this.sessions) session.ended = true;
    this.server.forceShutdown();
  }

  private connect(call: grpc.ServerDuplexStream<DaemonMessage, ControllerMessage>): void {
    call.on("error", () => undefined);
    if (this.refuseConnections) {
      this.refusedConnections += 1;
      call.end();
      return;
    }
    const session: FakeSession = { id: `s${this.sessions.length + 1}`, messages: [], call, ended: false };
    this.sessions.push(session);
    call.on("end", () => {
      session.ended = true;
      call.end();
    });
    call.on("data", (message: DaemonMessage) => {
      session.messages.push(message);
      if (message.payload === "hello") {
        call.write(
          controllerMessage("hello_ack", {
            protocol_version: 1,
            protocol_compatible: true,
            session_id: session.id,
            heartbeat_interval_ms: 0,
            api_credential: { token: this.options.apiToken, expires_at_ms: Date.now() + 3_600_000 },
            http_port: this.httpPort,
          }),
        );
      } else if (message.payload === "command_result") {
        this.pending.get(message.command_result.command_id)?.(message.command_result);
        this.pending.delete(message.command_result.command_id);
      } else if (message.payload === "ping") {
        call.write(controllerMessage("pong", { sequence: message.ping.sequence, sent_at_ms: Date.now() }));
      }
    });
  }
}

/** A file of a fake template. */
export interface FakeTemplateFile {
  path: string;
  content: string;
}

/** The controller's template manifest and blob routes over fake templates; records bearer tokens. */
export class FakeTemplateServer {
  /** Every request: its path, Authorization and X-Forwarded-For headers. */
  readonly requests: { path: string; authorization: string; forwardedFor: string }[] = [];
  /** Only this bearer token is accepted. */
  acceptedToken: string;
  private readonly templates = new Map<string, { hash: string; variables: Record<string, string>; files: Map<string, Buffer> }>();

  private constructor(
    private readonly server: Server,
    readonly port: number,
    token: string,
  ) {
    this.acceptedToken = token;
  }

  static async start(token: string): Promise<FakeTemplateServer> {
    let fake: FakeTemplateServer | null = null;
    const server = createServer((req, res) =>
      fake!.handle(req.url ?? "/", String(req.headers.authorization ?? ""), String(req.headers["x-forwarded-for"] ?? ""), res),
    );
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as { port: number }).port;
    fake = new FakeTemplateServer(server, port, token);
    return fake;
  }

  /** Adds (or replaces) a template with these files. */
  put(name: string, files: FakeTemplateFile[], variables: Record<string, string> = {}): void {
    const hash = createHash("sha256")
      .update(JSON.stringify([name, files, variables]))
      .digest("hex");
    this.templates.set(name, { hash, variables, files: new Map(files.map((f) => [f.path, Buffer.from(f.content)])) });
  }

  private handle(url: string, authorization: string, forwardedFor: string, res: import("node:http").ServerResponse): void {
    const parsed = new URL(url, "http://x");
    this.requests.push({ path: parsed.pathname, authorization, forwardedFor });
    // Plugin calls (workload tokens) are recorded and answered 200 like a controller taking them;
    // readiness still comes only from the test's mark_instance_ready command.
    if (parsed.pathname.startsWith("/api/plugin/") && authorization.startsWith("Bearer ")) {
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
      return;
    }
    if (authorization !== `Bearer ${this.acceptedToken}`) {
      res.writeHead(401, { "content-type": "application/json" }).end(JSON.stringify({ error: { code: "UNAUTHORIZED" } }));
      return;
    }
    const match = /^\/api\/v1\/templates\/([^/]+)\/(manifest|blobs\/([0-9a-f]{64}))$/.exec(parsed.pathname);
    const template = match ? this.templates.get(decodeURIComponent(match[1]!)) : undefined;
    if (!match || !template) {
      res.writeHead(404).end();
      return;
    }
    if (match[2] === "manifest") {
      const entries = [];
      const dirs = new Set<string>();
      for (const [path, data] of template.files) {
        const parts = path.split("/");
        for (let i = 1; i < parts.length; i++) dirs.add(parts.slice(0, i).join("/"));
        entries.push({ path, mode: FILE_MODE, size: data.byteLength, sha256: createHash("sha256").update(data).digest("hex") });
      }
      for (const dir of dirs) entries.push({ path: dir, mode: DIR_MODE, size: 0, sha256: "" });
      entries.sort((a, b) => (a.path < b.path ? -1 : 1));
      res
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify({ templateName: decodeURIComponent(match[1]!), hash: template.hash, variables: template.variables, entries }));
      return;
    }
    const wanted = match[3]!;
    const data = [...template.files.values()].find((d) => createHash("sha256").update(d).digest("hex") === wanted);
    if (!data) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "content-type": "application/octet-stream" }).end(data);
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** A `cloud-daemon` child process joined to `controller`'s CA (its identity is written before it starts). */
export interface DaemonChild {
  child: ChildProcess;
  dir: string;
  workDir: string;
  dataDir: string;
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGTERM, SIGKILL after a bound; resolves with how it exited. */
  stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  remove(): void;
}

export function spawnDaemonChild(controller: FakeController, nodeId: string, extra: Record<string, unknown> = {}): DaemonChild {
  const dir = mkdtempSync(join(tmpdir(), "cloud-daemon-wire-"));
  const dataDir = join(dir, "data");
  mkdirSync(dataDir, { recursive: true });
  const nodeCert = issueNodeCertificate(controller.ca, { nodeId });
  writeFileSync(join(dataDir, IDENTITY_FILES.key), nodeCert.keyPem, { mode: 0o600 });
  writeFileSync(join(dataDir, IDENTITY_FILES.certificate), nodeCert.certPem);
  writeFileSync(join(dataDir, IDENTITY_FILES.ca), controller.ca.certPem);
  writeFileSync(join(dataDir, IDENTITY_FILES.nodeId), `${nodeId}\n`);
  const configPath = join(dir, "daemon.yml");
  writeFileSync(
    configPath,
    toYaml({
      controllers: [controller.address],
      workDir: "work",
      dataDir: "data",
      maxMemoryMb: 2048,
      statusIntervalMs: 1000,
      reconnectDelayMinMs: 50,
      reconnectDelayMaxMs: 300,
      templateCacheSizeMbMax: 16,
      ...extra,
    }),
  );
  const child = spawn(process.execPath, ["--import", "tsx", "src/daemon/main.ts", "--config", configPath], {
    cwd: ROOT_DIR,
    env: { ...process.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout!.on("data", (c: Buffer) => (output = (output + c.toString()).slice(-100_000)));
  child.stderr!.on("data", (c: Buffer) => (output = (output + c.toString()).slice(-100_000)));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  return {
    child,
    dir,
    workDir: join(dir, "work"),
    dataDir,
    output: () => output,
    exited,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), CHILD_STOP_TIMEOUT_MS);
        const how = await exited;
        clearTimeout(timer);
        return how;
      }
      return await exited;
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** A wire InstanceSpec with defaults for a simulated instance. */
export function wireSpec(instanceId: string, port: number, overrides: Partial<InstanceSpec> = {}): InstanceSpec {
  return {
    instance_id: instanceId,
    group: "lobby",
    platform: "simulated-standalone",
    port,
    memory_mb: 256,
    static: false,
    environment: { ...SIM_WIRE_ENV },
    template_hashes: [],
    workload_token: "",
    controller_url: "",
    variables: {},
    templates: [],
    jar_file: "",
    ...overrides,
  };
}

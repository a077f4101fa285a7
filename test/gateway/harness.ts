// Test helpers for the daemon gateway: a controller in this process (real gRPC on 127.0.0.1,
// ephemeral or fixed ports, tunable heartbeats), token and node routes over HTTP, an event
// recorder, raw gRPC streams, in-process gateway clients and `cloud-daemon` child processes.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { stringify as toYaml } from "yaml";
import { parseControllerConfig } from "../../src/config/load.js";
import { startController, type RunningController } from "../../src/controller/controller.js";
import { GatewayClient, type ClientState, type GatewayClientOptions } from "../../src/daemon/gateway-client.js";
import type { CloudEvent } from "../../src/events/types.js";
import type { GatewayTuning } from "../../src/gateway/daemon-gateway.js";
import type { SchedulerTuning } from "../../src/scheduler/scheduler-host.js";
import { loadNodeGateway, type ControllerMessage, type DaemonMessage, type JoinRequest, type JoinResponse } from "../../src/wire/daemon-proto.js";
import { CONTROLLER_CERTIFICATE_NAME } from "../../src/wire/certificate-names.js";
import { login, TEST_ADMIN_PASSWORD, testConfig, type ConfigOverrides } from "../support/controller.js";

const ROOT_DIR = join(import.meta.dirname, "..", "..");
/** How long a daemon child gets to exit after SIGTERM before SIGKILL. */
const CHILD_STOP_TIMEOUT_MS = 5_000;

/** A temp directory removed by {@link cleanupDirs}. */
const dirs: string[] = [];
export function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
}
/** Removes every directory made by {@link tempDir} so far; retried briefly while a process still writes in one. */
export function cleanupDirs(): void {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 });
}

/** Every `cloud-daemon` child started by {@link spawnDaemon} in this file. */
const daemonChildren: DaemonProcess[] = [];

// Whatever a test file does in its own hooks, when it ends no daemon child it started is left
// running and no directory this harness made is left behind: the hook belongs to the file's root
// test, so it runs after every suite's `after`, also when a test failed or timed out.
after(async () => {
  for (const daemon of daemonChildren.splice(0)) await daemon.kill9();
  cleanupDirs();
});

/** A controller in this process with its events recorded. */
export interface GatewayController {
  url: string;
  adminToken: string;
  grpcAddress: string;
  dataDir: string;
  controller: RunningController;
  events: CloudEvent[];
  /** The controller's log output so far (the last 200,000 characters). */
  logs(): string;
  stop(): Promise<void>;
}

export async function startGatewayController(
  opts: { dataDir?: string; grpcPort?: number; tuning?: Partial<GatewayTuning>; scheduler?: Partial<SchedulerTuning>; config?: ConfigOverrides } = {},
): Promise<GatewayController> {
  const dataDir = opts.dataDir ?? tempDir("cloud-gw-controller-");
  const config = parseControllerConfig(testConfig(dataDir, { ...opts.config, grpc: { port: opts.grpcPort ?? 0 } }), {
    env: {},
    source: "test configuration",
  });
  let output = "";
  const controller = await startController(config, {
    env: {},
    logOut: { write: (chunk: string) => void (output = (output + chunk).slice(-200_000)) },
    gatewayTuning: opts.tuning,
    schedulerTuning: opts.scheduler,
  });
  const events: CloudEvent[] = [];
  controller.events.subscribeAll((event) => void events.push(event));
  const adminToken = await login(controller.httpUrl, "admin", TEST_ADMIN_PASSWORD);
  return {
    url: controller.httpUrl,
    adminToken,
    grpcAddress: `127.0.0.1:${controller.grpcPort}`,
    dataDir,
    controller,
    events,
    logs: () => output,
    stop: () => controller.stop(),
  };
}

export async function api(c: GatewayController, method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(`${c.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${c.adminToken}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : null };
}

/** Creates a node join token; returns its value and id. */
export async function createToken(c: GatewayController, body: Record<string, unknown> = {}): Promise<{ token: string; id: string }> {
  const res = await api(c, "POST", "/api/v1/admin/tokens", body);
  if (res.status !== 201) throw new Error(`token create: ${res.status} ${JSON.stringify(res.json)}`);
  return { token: res.json.token, id: res.json.id };
}

/** Revokes a node join token. */
export async function revokeToken(c: GatewayController, id: string): Promise<void> {
  const res = await api(c, "DELETE", `/api/v1/admin/tokens/${id}`);
  if (res.status !== 204) throw new Error(`token revoke: ${res.status}`);
}

/** GET /api/v1/nodes/{id}; null when 404. */
export async function getNode(c: GatewayController, id: string): Promise<any> {
  const res = await api(c, "GET", `/api/v1/nodes/${id}`);
  return res.status === 404 ? null : res.json;
}

/** Events of `type` (optionally for one node) recorded so far. */
export function eventsOf(c: GatewayController, type: string, nodeId?: string): CloudEvent[] {
  return c.events.filter((e) => e.type === type && (nodeId === undefined || e.data.nodeId === nodeId));
}

type RawClient = grpc.Client & {
  Join(request: JoinRequest, callback: (error: grpc.ServiceError | null, response?: JoinResponse) => void): grpc.ClientUnaryCall;
  Connect(): grpc.ClientDuplexStream<DaemonMessage, ControllerMessage>;
};
const NodeGateway = loadNodeGateway() as unknown as new (address: string, credentials: grpc.ChannelCredentials, options: object) => RawClient;

/** A raw NodeGateway client; with `identity` it presents that client certificate. */
export function rawClient(address: string, identity?: { caPem: string; keyPem: string; certificatePem: string }): RawClient {
  const credentials = identity
    ? grpc.credentials.createSsl(Buffer.from(identity.caPem), Buffer.from(identity.keyPem), Buffer.from(identity.certificatePem), {
        checkServerIdentity: (_host, cert) => (cert.subject?.CN === CONTROLLER_CERTIFICATE_NAME ? undefined : new Error("not a controller")),
      })
    : grpc.credentials.createSsl(null, null, null, { rejectUnauthorized: false, checkServerIdentity: () => undefined });
  return new NodeGateway(address, credentials, { "grpc.ssl_target_name_override": CONTROLLER_CERTIFICATE_NAME });
}

/** Join over a raw client; resolves with the response or the gRPC error. */
export function rawJoin(address: string, request: Partial<JoinRequest>): Promise<{ response?: JoinResponse; error?: grpc.ServiceError }> {
  const client = rawClient(address);
  const full: JoinRequest = {
    token: "",
    node_id: "",
    hostname: "test-host",
    daemon_version: "test",
    total_memory_mb: 1024,
    csr_public_key_pem: "",
    ...request,
  };
  return new Promise((resolve) => {
    client.Join(full, (error, response) => {
      client.close();
      resolve(error ? { error } : { response: response! });
    });
  });
}

/** An in-process daemon connection with its states recorded. */
export interface TestClient {
  client: GatewayClient;
  states: ClientState[];
  dataDir: string;
}

const quietLogger = { info: () => undefined, warn: () => undefined, error: () => undefined };

export function testClient(controllers: string[], overrides: Partial<GatewayClientOptions> = {}): TestClient {
  const dataDir = overrides.dataDir ?? tempDir("cloud-gw-daemon-");
  const states: ClientState[] = [];
  const client = new GatewayClient({
    controllers,
    dataDir,
    maxMemoryMb: 2048,
    daemonVersion: "0.1.0-test",
    hostname: "test-host",
    statusIntervalMs: 200,
    reconnectDelayMinMs: 50,
    reconnectDelayMaxMs: 500,
    logger: quietLogger,
    ...overrides,
    onStateChange: (state, detail) => {
      states.push(state);
      overrides.onStateChange?.(state, detail);
    },
  });
  return { client, states, dataDir };
}

/** A `cloud-daemon` child process. */
export interface DaemonProcess {
  child: ChildProcess;
  output(): string;
  /** The directory of daemon.yml (see {@link spawnDaemon}'s `dir`). */
  dir: string;
  dataDir: string;
  /** SIGKILL and wait for exit. */
  kill9(): Promise<void>;
  /** SIGTERM, SIGKILL after a bound; waits for exit. */
  stop(): Promise<void>;
}

/** Starts `cloud-daemon` with a daemon.yml in `dir` (a new temp directory unless given: pass one again to restart a daemon). */
export function spawnDaemon(controllers: string[], token: string, extra: Record<string, unknown> = {}, dir = tempDir("cloud-gw-daemon-proc-")): DaemonProcess {
  const configPath = join(dir, "daemon.yml");
  writeFileSync(
    configPath,
    toYaml({
      controllers,
      token,
      workDir: "work",
      dataDir: "data",
      maxMemoryMb: 1024,
      statusIntervalMs: 200,
      reconnectDelayMinMs: 50,
      reconnectDelayMaxMs: 500,
      ...extra,
    }),
  );
  const child = spawn(process.execPath, ["--import", "tsx", "src/daemon/main.ts"], {
    cwd: ROOT_DIR,
    env: { ...process.env, CLOUD_DAEMON_CONFIG: configPath },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout!.on("data", (c: Buffer) => (output += c.toString()));
  child.stderr!.on("data", (c: Buffer) => (output += c.toString()));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const alive = () => child.exitCode === null && child.signalCode === null;
  const daemon: DaemonProcess = {
    child,
    output: () => output,
    dir,
    dataDir: join(dir, "data"),
    kill9: async () => {
      if (alive()) child.kill("SIGKILL");
      await exited;
    },
    stop: async () => {
      if (!alive()) return;
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), CHILD_STOP_TIMEOUT_MS);
      await exited;
      clearTimeout(timer);
    },
  };
  daemonChildren.push(daemon);
  return daemon;
}

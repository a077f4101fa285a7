/**
 * Test helpers that start a real controller.
 *
 * - {@link startTestController}: a CHILD PROCESS (`node --import tsx src/controller/main.ts --config
 *   <tmp yml>`) on 127.0.0.1 with ephemeral ports, a temporary data directory and a known admin
 *   password; it logs in as admin. `kill9()` + `restart()` test durability across a hard crash.
 * - {@link startInProcessController}: the same controller inside the test process (faster; use it
 *   when the test does not need a process boundary).
 *
 * Always `await stop()` (e.g. in `after`/`t.after`): it ends the process and removes the temp dir.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify as toYaml } from "yaml";
import { CONFIG_ENV_OVERRIDES, parseControllerConfig } from "../../src/config/load.js";
import { mergeConfig, type ConfigOverrides } from "./config-overrides.js";
import { LISTENING_MESSAGE_PREFIX, startController, type RunningController } from "../../src/controller/controller.js";

const ROOT_DIR = join(import.meta.dirname, "..", "..");
const MAIN_ENTRY = "src/controller/main.ts";

/** Admin password every test controller starts with (unless overridden). */
export const TEST_ADMIN_PASSWORD = "test-admin-password";
/** A cold `tsx` start on a busy 2-core machine can be slow; beyond this the start fails. */
export const START_TIMEOUT_MS_DEFAULT = 60_000;
/** `stop()` waits this long after SIGTERM before sending SIGKILL. */
export const STOP_TIMEOUT_MS = 15_000;
/** Captured child output kept for diagnostics (the tail is kept). */
const OUTPUT_KEPT_CHARS_MAX = 1_000_000;

export { mergeConfig, type ConfigOverrides };

export interface TestControllerOptions {
  /** Reuse this data directory (it is then NOT removed on stop). Default: a fresh temp dir. */
  dataDir?: string;
  /** Log in as admin and fill `adminToken` (default true). */
  login?: boolean;
  /** Extra environment for the child (CLOUD_* overrides of the parent are never inherited). */
  env?: Record<string, string>;
  startTimeoutMs?: number;
}

export interface TestController {
  /** Base URL, e.g. `http://127.0.0.1:41234`. */
  url: string;
  /** Bearer token of the admin user ("" when `login: false`). */
  adminToken: string;
  adminUsername: string;
  adminPassword: string;
  dataDir: string;
  configPath: string;
  pid: number;
  /** Everything the child wrote to stdout and stderr so far (tail-bounded). */
  output(): string;
  /** SIGTERM, wait for exit (SIGKILL after {@link STOP_TIMEOUT_MS}), remove the temp dir if owned. */
  stop(): Promise<void>;
  /** SIGKILL and wait for exit; keeps the data directory (for `restart()`). */
  kill9(): Promise<void>;
  /** Starts a new child on the same config and data dir (the previous one must have exited). */
  restart(): Promise<TestController>;
}

/** controller.yml contents for a test controller in `dataDir`. */
export function testConfig(dataDir: string, overrides: ConfigOverrides = {}): ConfigOverrides {
  return mergeConfig(
    {
      http: { host: "127.0.0.1", port: 0 },
      grpc: { port: 0 },
      raft: { host: "127.0.0.1", port: 0, dataDir: join(dataDir, "raft") },
      data: { dir: dataDir },
      auth: { adminPassword: TEST_ADMIN_PASSWORD },
      logging: { level: "INFO", format: "JSON" },
    },
    overrides,
  );
}

/** POST /api/v1/auth/login; returns the bearer token. */
export async function login(url: string, username: string, password: string): Promise<string> {
  const res = await fetch(`${url}/api/v1/auth/login`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ username, password }),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`login as ${username} failed: ${res.status} ${text}`);
  const body = JSON.parse(text) as { token?: unknown };
  if (typeof body.token !== "string") throw new Error(`login answered without a token: ${text}`);
  return body.token;
}

/** Environment for the child: the parent's, minus every variable that would override its config. */
function childEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.CLOUD_CONFIG;
  for (const { env: name } of CONFIG_ENV_OVERRIDES) delete env[name];
  return { ...env, ...extra };
}

function waitForExit(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once("exit", () => resolve()));
}

/** Starts a controller child process; see the module comment. */
export async function startTestController(overrides: ConfigOverrides = {}, options: TestControllerOptions = {}): Promise<TestController> {
  const ownsDir = options.dataDir === undefined;
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), "cloud-controller-"));
  const config = testConfig(dataDir, overrides);
  const configPath = join(dataDir, "controller.test.yml");
  writeFileSync(configPath, toYaml(config));
  const auth = (config.auth ?? {}) as { adminUsername?: string; adminPassword?: string };
  try {
    return await spawnController({
      configPath,
      dataDir,
      ownsDir,
      adminUsername: auth.adminUsername ?? "admin",
      adminPassword: auth.adminPassword ?? TEST_ADMIN_PASSWORD,
      options,
    });
  } catch (err) {
    if (ownsDir) rmSync(dataDir, { recursive: true, force: true });
    throw err;
  }
}

interface SpawnSpec {
  configPath: string;
  dataDir: string;
  ownsDir: boolean;
  adminUsername: string;
  adminPassword: string;
  options: TestControllerOptions;
}

async function spawnController(spec: SpawnSpec): Promise<TestController> {
  const { options } = spec;
  const child = spawn(process.execPath, ["--import", "tsx", MAIN_ENTRY, "--config", spec.configPath], {
    cwd: ROOT_DIR,
    env: childEnv(options.env),
    stdio: ["ignore", "pipe", "pipe"],
  });
  const killOnParentExit = () => child.kill("SIGKILL");
  process.once("exit", killOnParentExit);
  child.once("exit", () => process.off("exit", killOnParentExit));

  let output = "";
  const append = (chunk: Buffer) => {
    output += chunk.toString("utf8");
    if (output.length > OUTPUT_KEPT_CHARS_MAX) output = output.slice(-OUTPUT_KEPT_CHARS_MAX);
  };
  child.stdout?.on("data", append);
  child.stderr?.on("data", append);

  const url = await new Promise<string>((resolve, reject) => {
    const timeoutMs = options.startTimeoutMs ?? START_TIMEOUT_MS_DEFAULT;
    const pattern = new RegExp(`${LISTENING_MESSAGE_PREFIX}(http://[^\\s"]+)`);
    const fail = (why: string) => {
      cleanup();
      child.kill("SIGKILL");
      reject(new Error(`test controller did not start: ${why}\n--- output ---\n${output}`));
    };
    const timer = setTimeout(() => fail(`no listening line within ${timeoutMs} ms`), timeoutMs);
    const onData = () => {
      const match = pattern.exec(output);
      if (match) {
        cleanup();
        resolve(match[1]);
      }
    };
    const onExit = (code: number | null, signal: string | null) => fail(`exited with ${signal ?? `code ${code}`}`);
    const cleanup = () => {
      clearTimeout(timer);
      child.stdout?.off("data", onData);
      child.off("exit", onExit);
    };
    child.stdout?.on("data", onData);
    child.once("exit", onExit);
  });

  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), STOP_TIMEOUT_MS);
      await waitForExit(child);
      clearTimeout(timer);
    }
    if (spec.ownsDir) rmSync(spec.dataDir, { recursive: true, force: true });
  };

  let adminToken = "";
  if (options.login !== false) {
    try {
      adminToken = await login(url, spec.adminUsername, spec.adminPassword);
    } catch (err) {
      await stop();
      throw new Error(`${(err as Error).message}\n--- output ---\n${output}`, { cause: err });
    }
  }

  return {
    url,
    adminToken,
    adminUsername: spec.adminUsername,
    adminPassword: spec.adminPassword,
    dataDir: spec.dataDir,
    configPath: spec.configPath,
    pid: child.pid ?? -1,
    output: () => output,
    stop,
    kill9: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await waitForExit(child);
    },
    restart: async () => {
      if (child.exitCode === null && child.signalCode === null)
        throw new Error("restart() needs the previous process to have exited (call kill9() or stop() first)");
      return spawnController(spec);
    },
  };
}

export interface InProcessTestController {
  url: string;
  adminToken: string;
  adminPassword: string;
  dataDir: string;
  controller: RunningController;
  /** Log lines written so far (JSON, one per line). */
  output(): string;
  /** Stops the controller and removes the temp dir if owned. */
  stop(): Promise<void>;
}

/** Starts a controller inside the test process; same defaults as {@link startTestController}. */
export async function startInProcessController(
  overrides: ConfigOverrides = {},
  options: Pick<TestControllerOptions, "dataDir" | "login"> = {},
): Promise<InProcessTestController> {
  const ownsDir = options.dataDir === undefined;
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), "cloud-controller-"));
  const raw = testConfig(dataDir, overrides);
  let output = "";
  try {
    const config = parseControllerConfig(raw, { env: {}, source: "test configuration" });
    const controller = await startController(config, {
      env: {},
      logOut: {
        write: (chunk: string) => {
          output += chunk;
          if (output.length > OUTPUT_KEPT_CHARS_MAX) output = output.slice(-OUTPUT_KEPT_CHARS_MAX);
        },
      },
    });
    const stop = async () => {
      await controller.stop();
      if (ownsDir) rmSync(dataDir, { recursive: true, force: true });
    };
    let adminToken = "";
    if (options.login !== false) {
      try {
        adminToken = await login(controller.httpUrl, config.auth.adminUsername, config.auth.adminPassword);
      } catch (err) {
        await stop();
        throw err;
      }
    }
    return { url: controller.httpUrl, adminToken, adminPassword: config.auth.adminPassword, dataDir, controller, output: () => output, stop };
  } catch (err) {
    if (ownsDir) rmSync(dataDir, { recursive: true, force: true });
    throw new Error(`in-process controller did not start: ${(err as Error).message}\n--- output ---\n${output}`, { cause: err });
  }
}

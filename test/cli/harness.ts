/**
 * Test harness for cloudctl: runs the real CLI as a child process in a temporary HOME, through the
 * bin of the source tree (`src/cli/launch.mjs`, what `npx cloudctl` runs: the sources bundled once
 * per version), and a small hono server standing in for the controller. `runOnTerminal` runs it on
 * a pseudo-terminal (util-linux `script`), for what only happens when a person is at the keyboard.
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { serve, type ServerType } from "@hono/node-server";
import { Hono } from "hono";
import { normalizeConfig, stringifyConfig } from "../../src/cli/config-file.js";

const root = join(import.meta.dirname, "..", "..");
/** The cloudctl bin of the source tree (package.json "bin"). */
export const cliBin = join(root, "src", "cli", "launch.mjs");

/** Bound on one CLI run; a hung child fails the test instead of the suite. */
export const cliRunTimeoutMs = 45_000;
/** CLI runs in flight at once in one test: the machine is shared, so a test never floods it. */
export const cliRunsInFlightMax = 3;

/** A temporary HOME directory, removed by `dispose`. */
export function tempHome(): { home: string; dispose: () => void } {
  const home = mkdtempSync(join(tmpdir(), "cloudctl-test-"));
  return { home, dispose: () => rmSync(home, { recursive: true, force: true }) };
}

/** Writes `~/.cloudctl/config.yml` directly, in the CLI's own format and modes. */
export function writeConfig(home: string, config: Record<string, unknown>): void {
  const dir = join(home, ".cloudctl");
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  writeFileSync(join(dir, "config.yml"), stringifyConfig(normalizeConfig(config).config), { mode: 0o600 });
}

/** A HOME whose current context `test` points at `url` with `token`. */
export function homeWithContext(url: string, token = "secret-token-123"): { home: string; dispose: () => void } {
  const result = tempHome();
  writeConfig(result.home, { currentContext: "test", contexts: { test: { controller: url, token } } });
  return result;
}

/** What a finished CLI run produced. */
export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Options of one CLI run. */
export interface CliRunOptions {
  home: string;
  env?: Record<string, string>;
  /** Written to stdin, which is then closed. */
  stdin?: string;
}

function childEnv(home: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: home, NO_UPDATE_NOTIFIER: "1" };
  return { ...env, ...extra };
}

/** Starts cloudctl with piped stdio; the caller drives stdin and must stop it. */
export function spawnCli(args: string[], options: { home: string; env?: Record<string, string> }): ChildProcessWithoutNullStreams {
  return spawn(process.execPath, [cliBin, ...args], {
    cwd: root,
    env: childEnv(options.home, options.env),
    stdio: ["pipe", "pipe", "pipe"],
  });
}

/** Collects output of a spawned CLI until it exits (killed after {@link cliRunTimeoutMs}). */
export function waitForExit(child: ChildProcessWithoutNullStreams): Promise<CliResult> {
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill("SIGKILL"), cliRunTimeoutMs);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

let runsInFlight = 0;
const queued: (() => void)[] = [];

/** Runs cloudctl to completion; at most {@link cliRunsInFlightMax} runs of this test file are in flight, the rest queue. */
export async function runCli(args: string[], options: CliRunOptions): Promise<CliResult> {
  if (runsInFlight >= cliRunsInFlightMax) await new Promise<void>((resolve) => queued.push(resolve));
  runsInFlight++;
  try {
    const child = spawnCli(args, options);
    const done = waitForExit(child);
    child.stdin.end(options.stdin ?? "");
    return await done;
  } finally {
    runsInFlight--;
    queued.shift()?.();
  }
}

/** One request seen by the fake controller. */
export interface SeenRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  authorization: string | undefined;
  body: string;
}

/** A fake controller: the test's hono routes behind a recorder. */
export interface FakeController {
  url: string;
  requests: SeenRequest[];
  close: () => Promise<void>;
}

/** Serves `routes` on 127.0.0.1 on an ephemeral port, recording every request. */
export async function startFakeController(routes: (app: Hono) => void): Promise<FakeController> {
  const app = new Hono();
  const requests: SeenRequest[] = [];
  app.use("*", async (c, next) => {
    const url = new URL(c.req.url);
    const body = c.req.method === "GET" || c.req.method === "HEAD" ? "" : await c.req.raw.clone().text();
    requests.push({
      method: c.req.method,
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      authorization: c.req.header("authorization"),
      body,
    });
    await next();
  });
  routes(app);
  const server: ServerType = await new Promise((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s));
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}

/** Parsed JSON bodies of the requests `server` saw with `method` on `path`, in arrival order. */
export function bodiesOf(server: FakeController, method: string, path: string): any[] {
  return server.requests.filter((r) => r.method === method && r.path === path).map((r) => JSON.parse(r.body || "null"));
}

/** The error envelope of the REST API. */
export function envelope(status: number, code: string, message: string): { error: { code: string; message: string; status: number } } {
  return { error: { code, message, status } };
}

/** Quotes one word for `sh -c`. */
export function shellWord(word: string): string {
  return `'${word.replace(/'/g, "'\\''")}'`;
}

/**
 * Runs cloudctl on a pseudo-terminal (`script -qec`), `input` typed on it: stdin and stdout are a
 * terminal for the CLI. stdout holds what the terminal showed (the echo of the input included).
 */
export async function runOnTerminal(args: string[], options: CliRunOptions): Promise<CliResult> {
  const command = [process.execPath, cliBin, ...args].map(shellWord).join(" ");
  const child = spawn("script", ["-qec", command, "/dev/null"], { cwd: root, env: childEnv(options.home, options.env), stdio: ["pipe", "pipe", "pipe"] });
  const done = waitForExit(child);
  child.stdin.end(options.stdin ?? "");
  return done;
}

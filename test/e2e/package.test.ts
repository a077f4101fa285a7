// The package as a user installs it: `npm run build`, `npm pack` into a temp directory, `npm install`
// of the tarball into an empty project, then only the installed bins (node_modules/.bin, run by
// their `#!/usr/bin/env node` line, cwd outside the repository, no tsx anywhere): cloud-controller
// on the development profile with a controller.yml written here, cloud-daemon joined with a node
// token made through the REST API (both started with the arguments of ExecStart in the shipped
// systemd units of docs/deploy/, the configuration paths replaced by this test's files), a group of the simulated platform whose instance reaches RUNNING
// (its server process runs the installed server.cjs), and cloudctl logging in and listing. Every
// process is stopped and every temp directory removed; each phase is bounded and printed.
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { basename, delimiter, dirname, join } from "node:path";
import { after, describe, it } from "node:test";
import { stringify as toYaml } from "yaml";
import { pidOfInstance } from "../support/instance-processes.js";
import { eventually } from "../support/wait.js";

const ROOT_DIR = join(import.meta.dirname, "..", "..");
const PACKAGE = JSON.parse(readFileSync(join(ROOT_DIR, "package.json"), "utf8")) as { name: string; version: string; bin: Record<string, string> };
const ADMIN_PASSWORD = "package-test-password";
const GROUP = "packaged";
/** Simulated servers of this test bind ports here (tests keep to 21000-29999, each its own range). */
const PORT_RANGE = { start: 24700, end: 24719 };

/** tsc alone needs about 30 s of CPU: on a shared 2-core machine under a load of 20 to 30 that is minutes of wall time. */
const BUILD_TIMEOUT_MS = 480_000;
const PACK_TIMEOUT_MS = 60_000;
const INSTALL_TIMEOUT_MS = 150_000;
const START_TIMEOUT_MS = 60_000;
const RUNNING_TIMEOUT_MS = 60_000;
const CLI_TIMEOUT_MS = 30_000;
/** A stopping process gets this long after SIGTERM before SIGKILL. */
const STOP_TIMEOUT_MS = 20_000;

const startedAt = Date.now();
const phase = (message: string) => console.log(`[package +${((Date.now() - startedAt) / 1000).toFixed(1)} s] ${message}`);

/** The test's environment without what npm, tsx or a CLOUD_* override would carry into a child. */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (/^(npm_|CLOUD_)/i.test(name) || name === "INIT_CWD" || name === "NODE_OPTIONS") continue;
    env[name] = value;
  }
  // `#!/usr/bin/env node` finds the Node.js running this test first.
  env.PATH = [dirname(process.execPath), env.PATH ?? ""].join(delimiter);
  return { ...env, ...extra };
}

interface Finished {
  code: number | null;
  signal: NodeJS.Signals | null;
  output: string;
}

/** Runs a command to its end, killed after `timeoutMs`; resolves with its status and output. */
function run(file: string, args: string[], opts: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs: number }): Promise<Finished> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { cwd: opts.cwd, env: opts.env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`${file} ${args.join(" ")} did not finish within ${opts.timeoutMs} ms\n${output.slice(-4_000)}`));
    }, opts.timeoutMs);
    child.once("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, output });
    });
  });
}

async function runOk(file: string, args: string[], opts: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs: number }): Promise<string> {
  const done = await run(file, args, opts);
  assert.equal(done.code, 0, `${file} ${args.join(" ")} exited with ${done.signal ?? done.code}\n${done.output.slice(-4_000)}`);
  return done.output;
}

/** A long-running installed bin. */
interface Service {
  child: ChildProcess;
  output(): string;
  /** SIGTERM, SIGKILL after {@link STOP_TIMEOUT_MS}; resolves with how it ended. */
  stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const services: Service[] = [];

function startService(file: string, args: string[], cwd: string, env: NodeJS.ProcessEnv): Service {
  const child = spawn(file, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  const append = (chunk: Buffer) => void (output = (output + chunk.toString()).slice(-500_000));
  child.stdout!.on("data", append);
  child.stderr!.on("data", append);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  const killOnExit = () => child.kill("SIGKILL");
  process.once("exit", killOnExit);
  void exited.then(() => process.off("exit", killOnExit));
  const service: Service = {
    child,
    output: () => output,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), STOP_TIMEOUT_MS);
        const ended = await exited;
        clearTimeout(timer);
        return ended;
      }
      return exited;
    },
  };
  services.push(service);
  return service;
}

/**
 * The command of a shipped systemd unit: the bin's name and its arguments, with the `--config` path
 * replaced by `configPath`.
 */
function unitCommand(unitFile: string, configPath: string): { bin: string; args: string[] } {
  const line = /^ExecStart=(.+)$/m.exec(readFileSync(unitFile, "utf8"))?.[1];
  assert.ok(line, `${unitFile} has an ExecStart line`);
  const [path, ...args] = line.trim().split(/\s+/);
  assert.equal(args.length, 2, `ExecStart=${line}: --config <path> only`);
  assert.equal(args[0], "--config");
  return { bin: basename(path!), args: [args[0]!, configPath] };
}

const ended = (name: string, service: Service) => () =>
  service.child.exitCode !== null || service.child.signalCode !== null
    ? `${name} exited (${service.child.signalCode ?? service.child.exitCode})\n${service.output().slice(-4_000)}`
    : null;

/** The line a TCP connection to a simulated server receives. */
function statusLine(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: "127.0.0.1", port });
    let text = "";
    socket.setTimeout(5_000, () => socket.destroy(new Error("no status line within 5 s")));
    socket.on("data", (chunk) => (text += chunk.toString()));
    socket.once("error", reject);
    socket.once("close", () => resolve(text));
  });
}

describe("the built package, installed from its tarball", { timeout: 900_000 }, () => {
  const work = mkdtempSync(join(tmpdir(), "cloud-package-"));
  after(async () => {
    for (const service of services.splice(0).reverse()) await service.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it("runs cloud-controller, cloud-daemon and cloudctl with plain node from node_modules/.bin", async () => {
    const npmEnv = cleanEnv();

    phase("npm run build");
    await runOk("npm", ["run", "build"], { cwd: ROOT_DIR, env: npmEnv, timeoutMs: BUILD_TIMEOUT_MS });
    phase("npm pack");
    const packDir = join(work, "pack");
    mkdirSync(packDir);
    // The build above is what prepack would run again.
    await runOk("npm", ["pack", "--ignore-scripts", "--pack-destination", packDir], { cwd: ROOT_DIR, env: npmEnv, timeoutMs: PACK_TIMEOUT_MS });
    const tarballs = readdirSync(packDir).filter((name) => name.endsWith(".tgz"));
    assert.deepEqual(tarballs, [`${PACKAGE.name}-${PACKAGE.version}.tgz`]);

    phase("npm install of the tarball into an empty project");
    const project = join(work, "project");
    mkdirSync(project);
    writeFileSync(join(project, "package.json"), `${JSON.stringify({ name: "installs-cloud-control-plane", private: true })}\n`);
    await runOk("npm", ["install", join(packDir, tarballs[0]), "--prefer-offline", "--no-audit", "--no-fund"], {
      cwd: project,
      env: npmEnv,
      timeoutMs: INSTALL_TIMEOUT_MS,
    });
    const installed = join(project, "node_modules", PACKAGE.name);
    const bin = (name: string) => join(project, "node_modules", ".bin", name);
    for (const name of Object.keys(PACKAGE.bin)) assert.ok(existsSync(bin(name)), `node_modules/.bin/${name}`);
    const shipped = [
      "dist/proto/raft.proto",
      "dist/proto/daemon.proto",
      "dist/proto/cluster.proto",
      "dist/src/daemon/spawner/spawner.cjs",
      "dist/src/daemon/simulated-server/server.cjs",
      "dist/dashboard/index.html",
      "controller.example.yml",
      "daemon.example.yml",
      "README.md",
      "docs/deploy/cloud-controller.service",
      "docs/deploy/cloud-daemon.service",
    ];
    for (const file of shipped) {
      assert.ok(existsSync(join(installed, file)), `the package ships ${file}`);
    }
    for (const absent of ["test", "scripts", "proto", "tsconfig.json"]) assert.ok(!existsSync(join(installed, absent)), `the package does not ship ${absent}`);
    // Of src/ only the cloudctl launcher ships (it runs dist/src/cli/main.js when installed): no TypeScript source.
    assert.deepEqual(
      readdirSync(join(installed, "src"), { recursive: true }).map(String).sort(),
      ["cli", join("cli", "launch.mjs")],
      "of src/ only the cloudctl launcher ships",
    );
    for (const devOnly of ["tsx", "typescript", "esbuild", "vite", "preact", "uplot"])
      assert.ok(!existsSync(join(project, "node_modules", devOnly)), `${devOnly} is not installed with the package`);
    const localDaemon = await runOk(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        `console.log(JSON.stringify((await import(${JSON.stringify(join(installed, "dist/src/controller/local-daemon.js"))})).localDaemonArgs()))`,
      ],
      { cwd: project, env: npmEnv, timeoutMs: CLI_TIMEOUT_MS },
    );
    assert.deepEqual(
      JSON.parse(localDaemon),
      [join(installed, "dist", "src", "daemon", "main.js")],
      "a compiled local daemon runs the compiled cloud-daemon with plain node",
    );
    const buildInfo = JSON.parse(readFileSync(join(installed, "dist", "build-info.json"), "utf8")) as { version: string; gitCommit: string };
    assert.equal(buildInfo.version, PACKAGE.version);

    phase("cloud-controller");
    const runDir = join(work, "run");
    const home = join(work, "home");
    mkdirSync(join(runDir, "daemon"), { recursive: true });
    mkdirSync(home);
    const binEnv = cleanEnv({ HOME: home });
    writeFileSync(
      join(runDir, "controller.yml"),
      toYaml({
        runtime: { profile: "development" },
        http: { host: "127.0.0.1", port: 0 },
        grpc: { port: 0 },
        raft: { host: "127.0.0.1", port: 0 },
        data: { dir: join(runDir, "controller-data") },
        auth: { adminPassword: ADMIN_PASSWORD },
        logging: { level: "INFO", format: "HUMAN" },
      }),
    );
    const controllerCommand = unitCommand(join(installed, "docs", "deploy", "cloud-controller.service"), join(runDir, "controller.yml"));
    assert.equal(controllerCommand.bin, "cloud-controller");
    const controller = startService(bin(controllerCommand.bin), controllerCommand.args, runDir, binEnv);
    const controllerEnded = ended("cloud-controller", controller);
    const url = (await eventually(() => /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(controller.output())?.[1], "the HTTP listening line", {
      timeoutMs: START_TIMEOUT_MS,
      stopIf: controllerEnded,
    }))!;
    const grpcPort = Number(
      (await eventually(() => /\(gRPC\) listening on port (\d+)/.exec(controller.output())?.[1], "the gRPC listening line", {
        timeoutMs: START_TIMEOUT_MS,
        stopIf: controllerEnded,
      }))!,
    );
    const version = (await (await fetch(`${url}/api/v1/system/version`)).json()) as { version: string; gitCommit: string };
    assert.equal(version.version, PACKAGE.version);
    assert.equal(version.gitCommit, /^[0-9a-f]{7,64}$/i.test(buildInfo.gitCommit) ? buildInfo.gitCommit : "unknown", "the commit the package was built from");
    // The installed controller serves the dashboard the package carries, and every asset it names.
    const page = await fetch(`${url}/ui/`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get("content-security-policy") ?? "", /script-src 'self'/);
    const html = await page.text();
    const assets = [...html.matchAll(/(?:src|href)="\.\/(assets\/[^"]+)"/g)].map((m) => m[1]);
    assert.ok(assets.some((a) => a.endsWith(".js")) && assets.some((a) => a.endsWith(".css")), html);
    for (const asset of assets) assert.equal((await fetch(`${url}/ui/${asset}`)).status, 200, asset);

    const login = await fetch(`${url}/api/v1/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ username: "admin", password: ADMIN_PASSWORD }),
    });
    assert.equal(login.status, 200);
    const { token: adminToken } = (await login.json()) as { token: string };
    const api = async (method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> => {
      const res = await fetch(`${url}${path}`, {
        method,
        headers: { authorization: `Bearer ${adminToken}`, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, json: text ? JSON.parse(text) : null };
    };

    phase("cloud-daemon with a node token");
    const created = await api("POST", "/api/v1/admin/tokens", { nodeId: "packaged-node", ttl: "10m" });
    assert.equal(created.status, 201, JSON.stringify(created.json));
    writeFileSync(
      join(runDir, "daemon", "daemon.yml"),
      toYaml({
        controllers: [`127.0.0.1:${grpcPort}`],
        token: created.json.token,
        workDir: "work",
        dataDir: "data",
        maxMemoryMb: 1024,
        statusIntervalMs: 1_000,
      }),
    );
    const daemonCommand = unitCommand(join(installed, "docs", "deploy", "cloud-daemon.service"), join(runDir, "daemon", "daemon.yml"));
    assert.equal(daemonCommand.bin, "cloud-daemon");
    const daemon = startService(bin(daemonCommand.bin), daemonCommand.args, join(runDir, "daemon"), binEnv);
    const daemonEnded = ended("cloud-daemon", daemon);
    const bothAlive = () => controllerEnded() ?? daemonEnded();
    await eventually(async () => (await api("GET", "/api/v1/nodes/packaged-node")).json?.state === "ONLINE", "the node ONLINE", {
      timeoutMs: RUNNING_TIMEOUT_MS,
      stopIf: bothAlive,
    });

    phase("a simulated group");
    const group = await api("POST", "/api/v1/groups", { name: GROUP, platform: "simulated", minInstances: 1, memoryMb: 128, portRange: PORT_RANGE });
    assert.equal(group.status, 201, JSON.stringify(group.json));
    const [instance] = await eventually(
      async () => {
        const list = (await api("GET", `/api/v1/services?group=${GROUP}&state=RUNNING`)).json as { id: string; port: number; node: string }[];
        return list.length === 1 ? list : null;
      },
      "the instance RUNNING",
      { timeoutMs: RUNNING_TIMEOUT_MS, stopIf: bothAlive },
    );
    assert.equal(instance.node, "packaged-node");
    assert.match(await statusLine(instance.port), new RegExp(`^SIMULATED ${instance.id} group=${GROUP} `));
    const serverPid = pidOfInstance(instance.id);
    assert.ok(serverPid, "the server process of the instance");
    const serverCommand = readFileSync(`/proc/${serverPid}/cmdline`, "utf8").split("\0").filter(Boolean);
    assert.deepEqual(
      serverCommand,
      [process.execPath, join(installed, "dist", "src", "daemon", "simulated-server", "server.cjs")],
      "the installed simulated server, run by plain node",
    );

    phase("cloudctl");
    const cloudctl = async (...args: string[]) => runOk(bin("cloudctl"), args, { cwd: work, env: binEnv, timeoutMs: CLI_TIMEOUT_MS });
    await cloudctl("context", "add", "packaged", "--controller", url);
    await cloudctl("login", "-u", "admin", "-p", ADMIN_PASSWORD);
    assert.match(readFileSync(join(home, ".cloudctl", "config.yml"), "utf8"), /token: \S+/, "the token stored in the context");
    const cliVersion = JSON.parse(await cloudctl("version", "--json")) as Record<string, unknown>;
    assert.equal(cliVersion.cli, PACKAGE.version);
    assert.equal(cliVersion.controller_version, PACKAGE.version);
    const listed = JSON.parse(await cloudctl("inst", "list", "--group", GROUP, "--json")) as { id: string; state: string }[];
    assert.deepEqual(
      listed.map((i) => [i.id, i.state]),
      [[instance.id, "RUNNING"]],
    );
    assert.match(await cloudctl("status"), new RegExp(`${GROUP}`));
    const unauthorized = await run(bin("cloudctl"), ["group", "list", "--token", "not-a-token"], { cwd: work, env: binEnv, timeoutMs: CLI_TIMEOUT_MS });
    assert.equal(unauthorized.code, 2, `a refused token is exit status 2\n${unauthorized.output}`);

    phase("stopping");
    assert.deepEqual(await daemon.stop(), { code: 0, signal: null }, daemon.output().slice(-4_000));
    assert.equal(pidOfInstance(instance.id), null, "the daemon stopped its server");
    assert.deepEqual(await controller.stop(), { code: 0, signal: null }, controller.output().slice(-4_000));
    phase("done");
  });
});

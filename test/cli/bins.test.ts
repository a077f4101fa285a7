// The three bins of the source tree parse their command lines strictly: `cloud-controller`,
// `cloud-daemon` and `npm start` answer --help and --version (exit 0) and refuse a typo with exit
// 64 and a suggestion before anything starts (no ./data, no listener); cloudctl answers --version,
// refuses unknown commands and flags with 64, and `version` names the controller's runtime. And the
// wrappers a developer uses from the repository root (`npx cloudctl`, `npm run cloudctl --`) run the
// source tree's cloudctl; killing the wrapper of an `events --follow` by its PID leaves nothing
// running.
import assert from "node:assert/strict";
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { after, before, describe, test } from "node:test";
import { startTestApp, type TestApp } from "../support/http-app.js";
import { eventually } from "../support/wait.js";
import { homeWithContext, runCli, waitForExit, type CliResult } from "./harness.js";

const ROOT = join(import.meta.dirname, "..", "..");
/** tsx by path: the bins run from a temporary directory, where `--import tsx` would not resolve. */
const TSX = pathToFileURL(join(ROOT, "node_modules", "tsx", "dist", "loader.mjs")).href;
const runMs = 120_000;

/** Runs `node <args>` in `cwd` to its end (killed after {@link runMs}: tsx compiles a bin's imports first). */
function runNode(args: string[], cwd: string, env: NodeJS.ProcessEnv = {}): Promise<CliResult> {
  return runToEnd(spawn(process.execPath, args, { cwd, env: { PATH: process.env.PATH, HOME: cwd, ...env }, stdio: ["pipe", "pipe", "pipe"] }));
}

/** Collects a child's output to its end (killed after {@link runMs}). */
function runToEnd(child: ChildProcessWithoutNullStreams): Promise<CliResult> {
  child.stdin.end();
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const timer = setTimeout(() => child.kill("SIGKILL"), runMs);
  return new Promise((resolve) =>
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    }),
  );
}

/** Every process below `pid` (from /proc), depth first. */
function descendants(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
    } catch {
      // Gone meanwhile.
    }
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const child of children.get(p) ?? []) {
      out.push(child);
      walk(child);
    }
  };
  walk(pid);
  return out;
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe("the bins' command lines and the wrappers of the source tree", { timeout: 600_000 }, () => {
  const work = mkdtempSync(join(tmpdir(), "cloud-bins-"));
  after(() => rmSync(work, { recursive: true, force: true }));

  for (const bin of [
    { name: "cloud-controller", entry: join(ROOT, "src", "controller", "main.ts"), helpWants: /--config <path>[\s\S]*CLOUD_HTTP_PORT[\s\S]*Exit status/ },
    { name: "cloud-daemon", entry: join(ROOT, "src", "daemon", "main.ts"), helpWants: /--config <path>[\s\S]*CLOUD_DAEMON_CONFIG[\s\S]*Exit status/ },
  ]) {
    test(`${bin.name}: --help and --version exit 0; a typo exits 64 with a suggestion and starts nothing`, async () => {
      const cwd = mkdtempSync(join(work, `${bin.name}-`));
      // One after the other: each is a TypeScript compile on a shared machine.
      const help = await runNode(["--import", TSX, bin.entry, "--help"], cwd);
      const version = await runNode(["--import", TSX, bin.entry, "--version"], cwd);
      const typo = await runNode(["--import", TSX, bin.entry, "--confg", "x.yml"], cwd, { CLOUD_HTTP_PORT: "0", CLOUD_GRPC_PORT: "0" });
      const stray = await runNode(["--import", TSX, bin.entry, "start"], cwd);
      assert.equal(help.code, 0, help.stderr);
      assert.match(help.stdout, bin.helpWants);
      assert.equal(version.code, 0, version.stderr);
      assert.equal(version.stdout.trim(), `${bin.name} ${JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).version}`);
      assert.equal(typo.code, 64, typo.stderr);
      assert.match(typo.stderr, /unknown option '--confg'\n\(Did you mean --config\?\)/);
      assert.equal(stray.code, 64, stray.stderr);
      assert.doesNotMatch(typo.stdout + typo.stderr, /listening|started/i);
      assert.deepEqual(readdirSync(cwd), [], "nothing was written: no data/, no daemon files");
    });
  }

  test("npm start: a typo exits 64 before the controller starts; --help exits 0", async () => {
    const npm = (args: string[]) => {
      const child = spawn("npm", ["start", "--silent", "--", ...args], {
        cwd: ROOT,
        env: { ...process.env, CLOUD_HTTP_PORT: "0" },
        stdio: ["pipe", "pipe", "pipe"],
      });
      return runToEnd(child);
    };
    const [typo, help] = await Promise.all([npm(["--cofnig", "x.yml"]), npm(["--help"])]);
    assert.equal(typo.code, 64, typo.stderr);
    assert.match(typo.stderr, /Did you mean --config\?/);
    assert.equal(help.code, 0, help.stderr);
    assert.match(help.stdout, /CLOUD_DEV_DAEMON=false/);
  });

  describe("cloudctl", () => {
    let t: TestApp;
    let home: string;
    let dispose = () => {};
    before(async () => {
      t = await startTestApp();
      ({ home, dispose } = homeWithContext(t.baseUrl, await t.tokenFor("VIEWER")));
    });
    after(async () => {
      dispose();
      await t?.close();
    });

    test("--version, unknown commands and flags (64, with a suggestion), and version's runtime lines", async () => {
      const [version, bogus, typo, none, human, json] = await Promise.all([
        runCli(["--version"], { home }),
        runCli(["gruop", "list"], { home }),
        runCli(["group", "list", "--filtr", "x"], { home }),
        runCli([], { home }),
        runCli(["version"], { home }),
        runCli(["version", "--json"], { home }),
      ]);
      assert.equal(version.code, 0, version.stderr);
      assert.match(version.stdout, /^cloudctl \d+\.\d+\.\d+ \(node v\d+\.\d+\.\d+, \w+\/\w+\)\n$/);
      assert.equal(bogus.code, 64);
      assert.match(bogus.stderr, /unknown command 'gruop'\n\(Did you mean group\?\)/);
      assert.equal(typo.code, 64);
      assert.match(typo.stderr, /unknown option '--filtr'\n\(Did you mean --filter\?\)/);
      assert.equal(none.code, 64, "no command: help on stderr");
      assert.match(none.stderr, /Usage: cloudctl/);
      assert.equal(human.code, 0, human.stderr);
      assert.match(human.stdout, /controller runtime\s+node v\d+/);
      assert.doesNotMatch(human.stdout, /javaVersion/);
      const keys = Object.keys(JSON.parse(json.stdout));
      for (const key of ["cli", "go", "os", "arch", "controller_version", "controller_javaVersion"]) assert.ok(keys.includes(key), `--json keeps ${key}`);
    });

    for (const wrapper of [
      { name: "npx cloudctl", file: "npx", args: ["cloudctl"] },
      { name: "npm run cloudctl --", file: "npm", args: ["run", "--silent", "cloudctl", "--"] },
    ]) {
      test(`${wrapper.name} runs the source tree's cloudctl; killing the wrapper of events --follow by its PID leaves nothing running`, async () => {
        const npmCache = mkdtempSync(join(work, "npm-cache-"));
        const env = { ...process.env, HOME: home, npm_config_cache: npmCache, npm_config_offline: "true", npm_config_update_notifier: "false" };
        const version = await new Promise<CliResult>((resolve) => {
          const child = spawn(wrapper.file, [...wrapper.args, "--version"], { cwd: ROOT, env, stdio: ["pipe", "pipe", "pipe"] });
          child.stdin.end();
          void waitForExit(child).then(resolve);
        });
        assert.equal(version.code, 0, version.stderr);
        assert.match(version.stdout, /^cloudctl \d/);

        const child = spawn(wrapper.file, [...wrapper.args, "events", "--follow"], { cwd: ROOT, env, stdio: ["pipe", "pipe", "pipe"] });
        child.stdin.end();
        const exited = waitForExit(child);
        let stdout = "";
        child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
        try {
          await eventually(
            () => t.eventStream.hub.clientCount >= 1,
            () => `events --follow streaming\n${stdout}`,
            runMs,
          );
          const below = descendants(child.pid!);
          assert.ok(below.length >= 1, "the wrapper runs cloudctl as a child");
          child.kill("SIGTERM");
          await exited;
          await eventually(
            () => below.every((pid) => !alive(pid)),
            () => `still running: ${below.filter(alive).join(", ")}`,
            10_000,
          );
          await eventually(() => t.eventStream.hub.clientCount === 0, "the stream was closed", 10_000);
        } finally {
          if (alive(child.pid!)) child.kill("SIGKILL");
        }
      });
    }
  });
});

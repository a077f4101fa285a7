// README.md's quick start, followed as a newcomer would: the commands of its code blocks are read
// from the README and run as written by `sh` from the repository root. `npm ci` is the one step
// left out (this checkout's dependencies are what it would install); `npm start` runs with a
// CLOUD_CONFIG that only moves its ports to free ones and its files to a directory of its own under
// data/, and the README's controller URL is replaced by the one it logs. The password `setup` asks
// for is the generated one the start log prints. Each `npx cloudctl` line must exit 0 and show
// what its comment promises; at the end `npm start` is stopped by its PID with SIGTERM and must
// leave no process behind (the shell and tsx npm runs, the controller, its local daemon and the
// instances all stop with it).
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { eventually } from "../support/wait.js";

const ROOT = join(import.meta.dirname, "..", "..");
const README_URL = "http://127.0.0.1:8080";
const START_TIMEOUT_MS = 240_000;
const COMMAND_TIMEOUT_MS = 120_000;
const RUNNING_TIMEOUT_MS = 120_000;

/** The shell lines of the README's "Quick start" section, comments and blank lines dropped. */
export function quickStartCommands(readme: string): string[][] {
  const start = readme.indexOf("## Quick start");
  assert.ok(start >= 0, "the README has a Quick start section");
  const end = readme.indexOf("\n## ", start + 1);
  const section = readme.slice(start, end < 0 ? undefined : end);
  const blocks = [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]);
  return blocks.map((block) =>
    block
      .split("\n")
      .map((line) => line.replace(/\s+#.*$/, "").trim())
      .filter((line) => line !== "" && !line.startsWith("#")),
  );
}

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

function sh(line: string, env: NodeJS.ProcessEnv, stdin = ""): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn("sh", ["-c", line], { cwd: ROOT, env, stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`${line} did not finish within ${COMMAND_TIMEOUT_MS} ms\n${stdout}\n${stderr}`));
    }, COMMAND_TIMEOUT_MS);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(stdin);
  });
}

/** Every process below `pid` (from /proc). */
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
  const walk = (p: number) => (children.get(p) ?? []).forEach((child) => (out.push(child), walk(child)));
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

describe("README quick start, as written", { timeout: 900_000 }, () => {
  const work = mkdtempSync(join(tmpdir(), "cloud-readme-"));
  const dataDir = join("data", `readme-quickstart-${process.pid}`);
  let start: ChildProcess | undefined;
  after(async () => {
    if (start && alive(start.pid!)) {
      const below = descendants(start.pid!);
      start.kill("SIGTERM");
      await new Promise((resolve) => setTimeout(resolve, 20_000).unref());
      for (const pid of [start.pid!, ...below].filter(alive)) process.kill(pid, "SIGKILL");
    }
    rmSync(work, { recursive: true, force: true });
    rmSync(join(ROOT, dataDir), { recursive: true, force: true });
  });

  it("npm start, then the cloudctl lines: setup, a simulated group, its instances, logs, exec, events", async () => {
    const [install, commands] = quickStartCommands(readFileSync(join(ROOT, "README.md"), "utf8"));
    assert.deepEqual(install, ["npm ci && npm start"]);
    assert.ok(existsSync(join(ROOT, "node_modules", ".bin", "tsx")), "npm ci has run in this checkout");
    assert.ok(commands.length >= 4 && commands.every((line) => line.startsWith("npx cloudctl ")), commands.join("\n"));

    // Free ports and a data directory of its own (inside data/, as npm start requires); nothing else.
    const config = join(work, "controller.yml");
    writeFileSync(config, `http:\n  port: 0\ngrpc:\n  port: 0\nraft:\n  port: 0\ndata:\n  dir: ${dataDir}\n`);
    const home = join(work, "home");
    const env: NodeJS.ProcessEnv = {
      ...Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^(npm_|CLOUD_)/i.test(name) && name !== "NODE_OPTIONS")),
      HOME: home,
      CLOUD_CONFIG: config,
      npm_config_cache: join(work, "npm-cache"),
      npm_config_offline: "true",
      npm_config_update_notifier: "false",
    };
    // `npm start` as typed: npm itself is the process whose PID is killed at the end.
    start = spawn("npm", ["start"], { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
    let log = "";
    start.stdout!.on("data", (chunk: Buffer) => (log = (log + chunk.toString()).slice(-400_000)));
    start.stderr!.on("data", (chunk: Buffer) => (log = (log + chunk.toString()).slice(-400_000)));
    const url = (
      await eventually(
        () => /Development controller ready at (http:\/\/\S+)/.exec(log),
        () => `npm start is ready\n${log.slice(-4_000)}`,
        START_TIMEOUT_MS,
      )
    )[1];
    assert.match(log, /cloudctl from this directory: npx cloudctl setup --controller/, "the start says how to run cloudctl");
    const password = /generated password: (\S+)/.exec(log)?.[1];
    assert.ok(password, "the first start prints the generated admin password");

    const results = new Map<string, Ran>();
    for (const written of commands) {
      const line = written.replaceAll(README_URL, url);
      if (/ inst list /.test(line)) {
        // "RUNNING within seconds": the line is run again until it says so.
        const listed = await eventually(
          async () => {
            const ran = await sh(line, env);
            return ran.code === 0 && (ran.stdout.match(/RUNNING/g) ?? []).length >= 2 ? ran : null;
          },
          () => `${line} shows two RUNNING instances\n${log.slice(-3_000)}`,
          RUNNING_TIMEOUT_MS,
        );
        results.set(written, listed);
        continue;
      }
      const ran = await sh(line, env, / setup /.test(line) ? `${password}\n` : "");
      assert.equal(ran.code, 0, `${line}\nstdout: ${ran.stdout}\nstderr: ${ran.stderr}`);
      results.set(written, ran);
    }
    const output = (fragment: string) => [...results].find(([line]) => line.includes(fragment))?.[1].stdout ?? "";
    assert.match(output(" setup "), /signed in as admin/);
    assert.match(output(" inst list "), /demo-1[\s\S]*RUNNING[\s\S]*demo-2|demo-2[\s\S]*RUNNING[\s\S]*demo-1/);
    assert.match(output(" logs "), /\[cloud\] STARTING[\s\S]*Done \(/);
    assert.match(output(" exec "), /\[Server\] hello/);
    assert.match(output(" events "), /GROUP_CREATED[\s\S]*group demo created[\s\S]*INSTANCE_STATE_CHANGED/);

    const below = descendants(start.pid!);
    const stopping = log.length;
    start.kill("SIGTERM");
    await eventually(() => !alive(start!.pid!), "npm start stopped", 60_000);
    await eventually(
      () => below.every((pid) => !alive(pid)),
      () => `left running: ${below.filter(alive).join(", ")}`,
      30_000,
    );
    // A graceful stop: the daemon stops its instances first (announcing it, so none is replaced on
    // the node going away), then the controller stops; nothing is forced or killed.
    const stop = log.slice(stopping);
    assert.match(stop, /Node local is shutting down[\s\S]*Controller stopped/, stop);
    assert.doesNotMatch(stop, /again; (exiting now|killing every instance)|RUNNER_SHUT_DOWN|Dispatch of/, stop);
  });
});

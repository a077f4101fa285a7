// How the daemon starts instance processes: directly, or through its spawner helper, which passes
// each process's pipes back over IPC. Both give the runner the same events (spawn, exit, close)
// and working pipes; the helper's death leaves running processes running and still reported.
import assert from "node:assert/strict";
import { tmpdir } from "node:os";
import { after, describe, it } from "node:test";
import { directLauncher, SpawnerLauncher, type LaunchedProcess, type ProcessLauncher } from "../../src/daemon/process-launcher.js";
import { isAlive } from "./runner-harness.js";

/** Echoes one stdin line to stdout as "echo <line>", writes "err" to stderr, exits with code 3. */
const ECHO_ONCE =
  "process.stdin.once('data', (d) => { process.stdout.write('echo ' + d); process.stderr.write('err\\n'); setTimeout(() => process.exit(3), 20); })";
/** Prints "up" and runs until killed. */
const RUN_FOREVER = "process.stdout.write('up\\n'); setInterval(() => {}, 1000)";

interface Observed {
  spawned: Promise<void>;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  closed: Promise<void>;
  stdout: () => string;
  stderr: () => string;
}

function observe(child: LaunchedProcess): Observed {
  let out = "";
  let err = "";
  const spawned = new Promise<void>((resolve, reject) => {
    child.once("spawn", () => {
      child.stdout?.on("data", (chunk: Buffer) => (out += chunk.toString()));
      child.stderr?.on("data", (chunk: Buffer) => (err += chunk.toString()));
      resolve();
    });
    child.once("error", reject);
  });
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  const closed = new Promise<void>((resolve) => child.once("close", resolve));
  return { spawned, exit, closed, stdout: () => out, stderr: () => err };
}

function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  const timeout = new Promise<T>((_, reject) => {
    setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms).unref();
  });
  return Promise.race([promise, timeout]);
}

const node = (script: string) => ({ file: process.execPath, args: ["-e", script], cwd: tmpdir(), env: { PATH: process.env.PATH ?? "" } });

const spawner = new SpawnerLauncher();
after(() => spawner.close());

for (const [name, launcher] of [
  ["direct", directLauncher],
  ["spawner helper", spawner],
] as [string, ProcessLauncher][]) {
  describe(`process launcher: ${name}`, { timeout: 60_000 }, () => {
    it("pipes work both ways, then exit and close carry the exit code", async () => {
      const child = launcher.launch(node(ECHO_ONCE));
      const seen = observe(child);
      await within(seen.spawned, 10_000, "spawn");
      assert.ok(typeof child.pid === "number" && child.pid > 0);
      child.stdin?.write("hello\n");
      assert.deepEqual(await within(seen.exit, 10_000, "exit"), { code: 3, signal: null });
      await within(seen.closed, 10_000, "close");
      assert.equal(seen.stdout(), "echo hello\n");
      assert.equal(seen.stderr(), "err\n");
    });

    it("what processes print at once is not lost, with many started together", async () => {
      // 300 lines at start, before anything is read, then exit: every line of every process arrives.
      const script = "for (let i = 0; i < 300; i++) process.stdout.write('line ' + i + '\\n'); process.stderr.write('done\\n');";
      const children = Array.from({ length: 30 }, () => launcher.launch(node(script)));
      const seen = children.map(observe);
      for (const one of seen) {
        await within(one.spawned, 20_000, "spawn");
        assert.deepEqual(await within(one.exit, 20_000, "exit"), { code: 0, signal: null });
        await within(one.closed, 20_000, "close");
      }
      const expected = Array.from({ length: 300 }, (_, i) => `line ${i}\n`).join("");
      for (const one of seen) {
        assert.equal(one.stdout(), expected);
        assert.equal(one.stderr(), "done\n");
      }
    });

    it("the process leads its own process group: a signal to the group ends it", async () => {
      const child = launcher.launch(node(RUN_FOREVER));
      const seen = observe(child);
      await within(seen.spawned, 10_000, "spawn");
      process.kill(-(child.pid as number), "SIGTERM");
      assert.deepEqual(await within(seen.exit, 10_000, "exit"), { code: null, signal: "SIGTERM" });
      await within(seen.closed, 10_000, "close");
    });

    it("a program that does not exist is an error, with no spawn", async () => {
      const child = launcher.launch({ file: "/nonexistent/definitely-not-here", args: [], cwd: tmpdir(), env: {} });
      let spawned = false;
      child.once("spawn", () => (spawned = true));
      const error = await within(new Promise<Error>((resolve) => child.once("error", resolve)), 10_000, "error");
      assert.equal((error as NodeJS.ErrnoException).code, "ENOENT");
      assert.equal(spawned, false);
    });
  });
}

describe("process launcher: the spawner helper's own life", { timeout: 60_000 }, () => {
  it("runs the spawns in a separate process", async () => {
    const launcher = new SpawnerLauncher({ helpers: 1 });
    try {
      const child = launcher.launch(node(ECHO_ONCE));
      const seen = observe(child);
      await within(seen.spawned, 10_000, "spawn");
      const helper = launcher.helperPids[0];
      assert.ok(helper !== undefined && helper !== process.pid && isAlive(helper));
      child.stdin?.write("bye\n");
      await within(seen.closed, 10_000, "close");
    } finally {
      await launcher.close();
    }
  });

  it("a killed helper leaves its processes running and reported; the next launch starts a new helper", async () => {
    const launcher = new SpawnerLauncher({ helpers: 1 });
    try {
      const child = launcher.launch(node("process.stdin.on('data', (d) => process.stdout.write('got ' + d)); setInterval(() => {}, 1000)"));
      const seen = observe(child);
      await within(seen.spawned, 10_000, "spawn");
      const firstHelper = launcher.helperPids[0] as number;
      process.kill(firstHelper, "SIGKILL");
      await within(
        (async () => {
          while (isAlive(firstHelper) || launcher.helperPids[0] === firstHelper) await new Promise((r) => setTimeout(r, 20));
        })(),
        10_000,
        "helper gone",
      );
      assert.ok(isAlive(child.pid as number), "the instance process outlives the helper");
      child.stdin?.write("ping\n");
      await within(
        (async () => {
          while (!seen.stdout().includes("got ping")) await new Promise((r) => setTimeout(r, 20));
        })(),
        10_000,
        "its pipes still work",
      );
      process.kill(-(child.pid as number), "SIGKILL");
      assert.deepEqual(await within(seen.exit, 10_000, "exit of the orphan"), { code: null, signal: null }, "the status is unknown without the helper");
      await within(seen.closed, 10_000, "close of the orphan");

      const nextChild = launcher.launch(node(ECHO_ONCE));
      const next = observe(nextChild);
      await within(next.spawned, 10_000, "spawn after the helper died");
      assert.notEqual(launcher.helperPids[0], firstHelper);
      nextChild.stdin?.write("again\n");
      assert.deepEqual(await within(next.exit, 10_000, "exit after the helper was replaced"), { code: 3, signal: null });
      await within(next.closed, 10_000, "close after the helper was replaced");
      assert.equal(next.stdout(), "echo again\n");
    } finally {
      await launcher.close();
    }
  });

  it("launches alternate between the helpers, each of which runs its own processes", async () => {
    const launcher = new SpawnerLauncher({ helpers: 2 });
    try {
      const children = [launcher.launch(node(ECHO_ONCE)), launcher.launch(node(ECHO_ONCE))];
      const seen = children.map(observe);
      for (const one of seen) await within(one.spawned, 10_000, "spawn");
      const helpers = launcher.helperPids;
      assert.equal(new Set(helpers).size, 2, `two helpers: ${helpers.join(", ")}`);
      children.forEach((child, i) => child.stdin?.write(`n${i}\n`));
      for (const [i, one] of seen.entries()) {
        assert.deepEqual(await within(one.exit, 10_000, "exit"), { code: 3, signal: null });
        await within(one.closed, 10_000, "close");
        assert.equal(one.stdout(), `echo n${i}\n`);
      }
    } finally {
      await launcher.close();
    }
    assert.throws(() => new SpawnerLauncher({ helpers: 0 }), /positive integer/);
  });

  it("after close, the helpers are gone and launches fail", async () => {
    const launcher = new SpawnerLauncher({ helpers: 1 });
    const first = observe(launcher.launch(node("process.exit(0)")));
    await within(first.spawned, 10_000, "spawn");
    const helper = launcher.helperPids[0] as number;
    await launcher.close();
    assert.equal(isAlive(helper), false);
    const refused = launcher.launch(node("process.exit(0)"));
    const error = await within(new Promise<Error>((resolve) => refused.once("error", resolve)), 5_000, "error after close");
    assert.match(error.message, /closed/);
  });
});

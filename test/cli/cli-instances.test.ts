// cloudctl against a real controller (in this process) with a real `cloud-daemon` child and
// simulated game servers: group start (MANUAL), the console (a typed line reaches the server's
// stdin and its output comes back, Ctrl-Q detaches with exit 0), exec, stop, force-stop, and
// group resume after a crash-loop pause. `--json` prints the controller's body.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  api,
  cleanupDirs,
  createToken,
  eventsOf,
  spawnDaemon,
  startGatewayController,
  type DaemonProcess,
  type GatewayController,
} from "../gateway/harness.js";
import { eventually } from "../support/wait.js";
import { homeWithContext, runCli, spawnCli, waitForExit, type CliResult } from "./harness.js";

/** Bound on waiting for the scheduler, the daemon or console output. */
const waitMs = 45_000;

interface Instance {
  id: string;
  group: string;
  state: string;
}

/** Resolves once `read()` matches `pattern`; fails after {@link waitMs} with what was read. */
function until(read: () => string, pattern: RegExp): Promise<void> {
  return eventually(() => pattern.test(read()), `${pattern} in output:\n${read()}`, waitMs).then(() => undefined);
}

function ok(result: CliResult): CliResult {
  assert.equal(result.code, 0, `exit ${result.code}\nstdout: ${result.stdout}\nstderr: ${result.stderr}`);
  return result;
}

describe("cloudctl instance and group operations on a real daemon", { timeout: 300_000 }, () => {
  let c: GatewayController;
  let daemon: DaemonProcess | undefined;
  let home: string;
  let disposeHome = () => {};

  const instances = async (group: string): Promise<Instance[]> =>
    ((await api(c, "GET", `/api/v1/services?group=${group}`)).json as Instance[]).filter((i) => i.group === group);
  const runningOf = (group: string, count: number) =>
    eventually(
      async () => {
        const up = (await instances(group)).filter((i) => i.state === "RUNNING");
        return up.length >= count ? up : null;
      },
      `${count} RUNNING in ${group}\n${daemon?.output().slice(-2_000)}`,
      waitMs,
    );
  const stateOf = async (id: string) => ((await api(c, "GET", `/api/v1/services/${id}`)).json as Instance).state;
  const cli = (args: string[]) => runCli(args, { home });

  before(async () => {
    c = await startGatewayController({ scheduler: { evaluationIntervalMs: 1_000 } });
    ({ home, dispose: disposeHome } = homeWithContext(c.url, c.adminToken));
    const { token } = await createToken(c);
    daemon = spawnDaemon([c.grpcAddress], token, { maxMemoryMb: 2048 });
    await eventually(() => eventsOf(c, "NODE_CONNECTED").length >= 1, "the daemon connected", waitMs);
  });

  after(async () => {
    await daemon?.stop();
    await c?.stop();
    cleanupDirs();
    disposeHome();
  });

  test("group start, then the console: a typed line reaches stdin, its output comes back, Ctrl-Q detaches; exec", async () => {
    ok(
      await cli([
        "group",
        "create",
        "--name",
        "arena",
        "--platform",
        "simulated",
        "--scaling-mode",
        "MANUAL",
        "--min",
        "1",
        "--max",
        "2",
        "--memory",
        "128",
        "--port-start",
        "41500",
        "--port-end",
        "41520",
      ]),
    );
    const started = ok(await cli(["group", "start", "arena", "--json"]));
    assert.equal(started.stdout, '{"count":1}\n', "--json prints the controller's body");
    const [target] = await runningOf("arena", 1);

    const child = spawnCli(["instance", "console", target.id], { home });
    try {
      const exited = waitForExit(child);
      let stdout = "";
      child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
      await until(() => stdout, /Done \(/);
      child.stdin.write("say from-cli\n");
      await until(() => stdout, /\[Server\] from-cli/);
      child.stdin.write(Buffer.of(0x11));
      const result = await exited;
      assert.equal(result.code, 0, result.stderr);
      assert.match(result.stderr, /detached/);
      assert.doesNotMatch(stdout, /"instanceId"/, "lines are printed as text, not as frames");
    } finally {
      child.kill();
    }

    const exec = ok(await cli(["instance", "exec", target.id, "say", "exec", "words", "--json"]));
    assert.deepEqual(JSON.parse(exec.stdout), { id: target.id, command: "say exec words", sent: true });
    const again = spawnCli(["inst", "console", target.id, "--json"], { home });
    try {
      const exited = waitForExit(again);
      let stdout = "";
      again.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
      await until(() => stdout, /\[Server\] exec words/);
      again.stdin.write(Buffer.of(0x11));
      const result = await exited;
      assert.equal(result.code, 0, result.stderr);
      const frame = JSON.parse(stdout.split("\n").find((l) => l.includes("exec words")) ?? "null");
      assert.equal(frame.instanceId, target.id, "--json prints each frame's data as sent");
    } finally {
      again.kill();
    }
  });

  test("stop and force-stop answer with the instance record; a stopped instance cannot be stopped again (exit 1)", async () => {
    const started = ok(await cli(["group", "start", "arena"]));
    assert.match(started.stdout, /1 instance\(s\) scheduled for group arena/);
    const [graceful, forced] = await runningOf("arena", 2);

    const stopped = ok(await cli(["instance", "stop", graceful.id, "--json"]));
    const record = JSON.parse(stopped.stdout);
    assert.equal(record.id, graceful.id);
    assert.equal(record.group, "arena");
    const killed = ok(await cli(["instance", "force-stop", forced.id]));
    assert.match(killed.stdout, new RegExp(`force-stop requested for ${forced.id}`));
    await eventually(async () => (await stateOf(graceful.id)) === "STOPPED", `${graceful.id} STOPPED`, waitMs);
    await eventually(async () => (await stateOf(forced.id)) === "STOPPED", `${forced.id} STOPPED`, waitMs);

    const [twice, unknown] = await Promise.all([cli(["instance", "stop", graceful.id, "--force"]), cli(["instance", "stop", "no-such-instance"])]);
    assert.equal(twice.code, 1, twice.stderr);
    assert.match(twice.stderr, /HTTP 409/);
    assert.equal(unknown.code, 4, unknown.stderr);
  });

  test("a crash-looping group: start explains the pause (exit 0), info shows it, resume lifts it", async () => {
    ok(
      await cli([
        "group",
        "create",
        "--name",
        "crashy",
        "--platform",
        "simulated",
        "--min",
        "1",
        "--max",
        "1",
        "--memory",
        "128",
        "--port-start",
        "41600",
        "--port-end",
        "41620",
      ]),
    );
    const crashed = new Set<string>();
    for (let i = 0; i < 3; i++) {
      const [victim] = (await runningOf("crashy", 1)).filter((v) => !crashed.has(v.id));
      assert.ok(victim, "a fresh instance runs");
      ok(await cli(["instance", "exec", victim.id, "crash", "7"]));
      await eventually(async () => (await stateOf(victim.id)) === "CRASHED", `${victim.id} CRASHED`, waitMs);
      crashed.add(victim.id);
      if (i < 2)
        await eventually(async () => (await instances("crashy")).some((v) => !crashed.has(v.id) && v.state === "RUNNING"), "a replacement runs", waitMs);
    }
    await eventually(async () => (await api(c, "GET", "/api/v1/groups/crashy")).json.paused === true, "crashy paused", waitMs);

    const [start, info] = await Promise.all([cli(["group", "start", "crashy"]), cli(["group", "info", "crashy"])]);
    ok(start);
    assert.match(start.stdout, /nothing scheduled for group crashy: .*paused/);
    ok(info);
    assert.match(info.stdout, /Paused\s+yes/);

    const resumed = ok(await cli(["group", "resume", "crashy", "--json"]));
    assert.equal(JSON.parse(resumed.stdout).paused, false);
    await runningOf("crashy", 1);
    const human = ok(await cli(["group", "resume", "crashy"]));
    assert.match(human.stdout, /group crashy is not paused/);
  });
});

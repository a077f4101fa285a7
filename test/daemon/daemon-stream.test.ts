// `cloud-daemon` as a real child process driven over the daemon stream by a fake controller (a
// minimal NodeGateway server over mutual TLS): inventory after each hello_ack, instance commands
// onto real simulated game servers, state/console/crash reports, fencing, idempotent starts,
// template layers from a fake manifest/blob HTTP server with the session's credential, the catch-up
// after a reconnect, and SIGTERM leaving no server behind. Every wait is bounded; every process is
// stopped in `after`.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { InstanceStateReport } from "../../src/wire/daemon-proto.js";
import { FakeController, FakeTemplateServer, spawnDaemonChild, wireSpec, type DaemonChild, type FakeSession } from "./fake-controller.js";
import { freePort, isAlive } from "./runner-harness.js";
import { eventually } from "../support/wait.js";

const API_TOKEN = "api-token-1";
const TOKEN = 5;

describe("cloud-daemon over the daemon stream", { timeout: 120_000 }, () => {
  let templates: FakeTemplateServer;
  let controller: FakeController;
  let daemon: DaemonChild;
  const pids = new Set<number>();

  const states = (): InstanceStateReport[] => controller.messagesOf("instance_state");
  const stateOf = (instanceId: string, state: string) => states().find((s) => s.instance_id === instanceId && s.state === state);
  const waitForState = (instanceId: string, state: string) =>
    eventually(
      () => stateOf(instanceId, state),
      () => `${instanceId} ${state} (saw ${controller.statesOf(instanceId).join(",")})\n${daemon.output()}`,
    );
  const waitForLine = (instanceId: string, text: string) =>
    eventually(
      () => controller.linesOf(instanceId).find((line) => line.includes(text)),
      () => `${instanceId} console "${text}" (saw ${controller.linesOf(instanceId).slice(-5).join(" | ")})`,
    );
  const indexIn = (session: FakeSession, predicate: (m: FakeSession["messages"][number]) => boolean) => session.messages.findIndex(predicate);

  before(async () => {
    templates = await FakeTemplateServer.start(API_TOKEN);
    controller = await FakeController.start({ httpPort: templates.port, apiToken: API_TOKEN });
    daemon = spawnDaemonChild(controller, "node-wire");
  });

  after(async () => {
    await daemon?.stop();
    for (const s of controller?.messagesOf("instance_state") ?? []) if (s.pid > 0) pids.add(s.pid);
    for (const pid of pids) if (isAlive(pid)) process.kill(pid, "SIGKILL");
    await controller?.stop();
    await templates?.stop();
    daemon?.remove();
  });

  it("sends an inventory right after hello_ack, before anything else", async () => {
    const session = await eventually(
      () => controller.sessions.find((s) => s.messages.some((m) => m.payload === "node_status")),
      () => `a session with node status\n${daemon.output()}`,
      30_000,
    );
    assert.deepEqual(
      session.messages.slice(0, 2).map((m) => m.payload),
      ["hello", "inventory"],
    );
    assert.deepEqual(controller.messagesOf("inventory", session)[0]!.instances, []);
  });

  it("runs a standalone instance: PREPARING → STARTING → RUNNING on its Done line; stdin reaches it", async () => {
    const result = await controller.command("start_instance", { group: "lobby", fencing_token: TOKEN, spec: wireSpec("lobby-1", await freePort()) });
    // Every decoded result carries `instances` and `log_lines`, empty except in the answers to list_instances and read_instance_log.
    assert.deepEqual(result, { command_id: result.command_id, ok: true, error_code: "", message: "", instances: [], log_lines: [] });
    const running = await waitForState("lobby-1", "RUNNING");
    assert.deepEqual(controller.statesOf("lobby-1"), ["PREPARING", "STARTING", "RUNNING"]);
    assert.equal(running.fencing_token, TOKEN);
    assert.ok(running.pid > 0 && running.port > 0);
    pids.add(running.pid);

    assert.equal((await controller.command("stdin_instance", { group: "lobby", fencing_token: TOKEN, instance_id: "lobby-1", line: "say hello" })).ok, true);
    await waitForLine("lobby-1", "[Server] hello");
    const sequences = controller.messagesOf("console_line").map((l) => l.sequence);
    assert.ok(
      sequences.every((n, i) => i === 0 || n > sequences[i - 1]!),
      `console sequences increase: ${sequences.join(",")}`,
    );
  });

  it("answers a repeated start ok and spawns nothing new", async () => {
    const pid = stateOf("lobby-1", "RUNNING")!.pid;
    const again = await controller.command("start_instance", { group: "lobby", fencing_token: TOKEN, spec: wireSpec("lobby-1", 1) });
    assert.equal(again.ok, true);
    assert.match(again.message, /already on this node \(RUNNING\)/);
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.deepEqual(controller.statesOf("lobby-1"), ["PREPARING", "STARTING", "RUNNING"]);
    assert.ok(isAlive(pid));
  });

  it("refuses a lower fencing token with STALE_EPOCH", async () => {
    for (const result of [
      await controller.command("stdin_instance", { group: "lobby", fencing_token: TOKEN - 1, instance_id: "lobby-1", line: "say stale" }),
      await controller.command("stop_instance", { group: "lobby", fencing_token: TOKEN - 1, instance_id: "lobby-1" }),
      await controller.command("start_instance", { group: "lobby", fencing_token: TOKEN - 1, spec: wireSpec("lobby-9", await freePort()) }),
      await controller.command("start_instance", { group: "lobby", fencing_token: TOKEN - 1, spec: wireSpec("lobby-1", 1) }),
    ]) {
      assert.equal(result.ok, false);
      assert.equal(result.error_code, "STALE_EPOCH");
      assert.match(result.message, /older than 5/);
    }
    assert.equal(stateOf("lobby-9", "PREPARING"), undefined);
    assert.ok(isAlive(stateOf("lobby-1", "RUNNING")!.pid));
  });

  it("relays plugin readiness: a simulated instance stays STARTING until mark_instance_ready", async () => {
    const spec = wireSpec("lobby-2", await freePort(), { platform: "simulated", workload_token: "workload-2" });
    assert.equal((await controller.command("start_instance", { group: "lobby", fencing_token: TOKEN, spec })).ok, true);
    await waitForState("lobby-2", "STARTING");
    await waitForLine("lobby-2", "Done (");
    // The simulated server reports ready through the daemon's plugin relay to the session's controller (the fake answers 200 and tells the runner nothing).
    const ready = await eventually(
      () => templates.requests.find((r) => r.path === "/api/plugin/ready"),
      () => "the plugin ready call",
    );
    assert.equal(ready.authorization, "Bearer workload-2");
    assert.equal(stateOf("lobby-2", "RUNNING"), undefined);
    assert.equal((await controller.command("mark_instance_ready", { group: "lobby", fencing_token: TOKEN, instance_id: "lobby-2" })).ok, true);
    pids.add((await waitForState("lobby-2", "RUNNING")).pid);
  });

  it("answers a stop as soon as it began; STOPPED follows when the process is gone", async () => {
    const pid = stateOf("lobby-1", "RUNNING")!.pid;
    const result = await controller.command("stop_instance", { group: "lobby", fencing_token: TOKEN, instance_id: "lobby-1" });
    assert.equal(result.ok, true);
    const stopped = await waitForState("lobby-1", "STOPPED");
    assert.deepEqual(controller.statesOf("lobby-1"), ["PREPARING", "STARTING", "RUNNING", "STOPPING", "STOPPED"]);
    assert.equal(stopped.exit_code, 0);
    const session = controller.current!;
    assert.ok(
      indexIn(session, (m) => m.payload === "command_result" && m.command_result.command_id === result.command_id) <
        indexIn(session, (m) => m.payload === "instance_state" && m.instance_state.instance_id === "lobby-1" && m.instance_state.state === "STOPPED"),
      "the result came before STOPPED",
    );
    await eventually(
      () => !isAlive(pid),
      () => "the stopped process to be gone",
    );
    const unknown = await controller.command("stop_instance", { group: "lobby", fencing_token: TOKEN, instance_id: "lobby-1" });
    assert.equal(unknown.error_code, "UNKNOWN_INSTANCE");
  });

  it("reports a crash: crash_report with exit code 3, then CRASHED", async () => {
    assert.equal((await controller.command("stdin_instance", { group: "lobby", fencing_token: TOKEN, instance_id: "lobby-2", line: "crash 3" })).ok, true);
    const crashed = await waitForState("lobby-2", "CRASHED");
    assert.equal(crashed.exit_code, 3);
    assert.equal(crashed.message, "ERROR_EXIT");
    const report = controller.messagesOf("crash_report").find((r) => r.instance_id === "lobby-2")!;
    assert.equal(report.exit_code, 3);
    assert.equal(report.signal, "");
    assert.equal(report.classification, "ERROR_EXIT");
    assert.equal(report.fencing_token, TOKEN);
    assert.ok(report.last_lines.some((line) => line.includes("Done (")));
    const session = controller.current!;
    assert.ok(
      indexIn(session, (m) => m.payload === "crash_report" && m.crash_report.instance_id === "lobby-2") <
        indexIn(session, (m) => m.payload === "instance_state" && m.instance_state.instance_id === "lobby-2" && m.instance_state.state === "CRASHED"),
    );
  });

  it("unpacks template layers fetched with the session's credential; api_credential replaces it", async () => {
    templates.put(
      "base",
      [
        { path: "server.properties", content: "motd={{motd}}\nlevel={{level}}\n" },
        { path: "plugins/readme.txt", content: "plugin data\n" },
      ],
      { motd: "from-template", level: "world" },
    );
    const spec = wireSpec("lobby-3", await freePort(), { templates: [{ name: "base", hash: "" }], variables: { motd: "from-spec" } });
    assert.equal((await controller.command("start_instance", { group: "lobby", fencing_token: TOKEN, spec })).ok, true);
    pids.add((await waitForState("lobby-3", "RUNNING")).pid);
    const dir = join(daemon.workDir, "dynamic", "lobby-3");
    assert.equal(readFileSync(join(dir, "server.properties"), "utf8"), "motd=from-spec\nlevel=world\n");
    assert.equal(readFileSync(join(dir, "plugins", "readme.txt"), "utf8"), "plugin data\n");
    const templateRequests = () => templates.requests.filter((r) => r.path.startsWith("/api/v1/templates/"));
    assert.ok(templateRequests().length >= 3 && templateRequests().every((r) => r.authorization === `Bearer ${API_TOKEN}`));
    const status = await eventually(
      () => controller.messagesOf("cache_status").find((s) => s.total_size_bytes > 0),
      () => "a cache_status after the unpack",
    );
    assert.equal(status.entry_count, 2);

    templates.acceptedToken = "api-token-2";
    controller.send("api_credential", { token: "api-token-2", expires_at_ms: Date.now() + 60_000 });
    templates.put("extra", [{ path: "extra.txt", content: "more\n" }]);
    const second = wireSpec("lobby-4", await freePort(), {
      templates: [
        { name: "base", hash: "" },
        { name: "extra", hash: "" },
      ],
    });
    assert.equal((await controller.command("start_instance", { group: "lobby", fencing_token: TOKEN, spec: second })).ok, true);
    pids.add((await waitForState("lobby-4", "RUNNING")).pid);
    assert.equal(readFileSync(join(daemon.workDir, "dynamic", "lobby-4", "extra.txt"), "utf8"), "more\n");
    assert.equal(templateRequests().at(-1)!.authorization, "Bearer api-token-2");

    const missing = wireSpec("lobby-5", await freePort(), { templates: [{ name: "no-such-template", hash: "" }] });
    assert.equal((await controller.command("start_instance", { group: "lobby", fencing_token: TOKEN, spec: missing })).ok, true);
    const failed = await waitForState("lobby-5", "CRASHED");
    assert.match(failed.message, /^PREPARE_FAILED: .*404/);
    assert.equal(failed.exit_code, -1);
    assert.equal(controller.messagesOf("crash_report").find((r) => r.instance_id === "lobby-5")!.classification, "PREPARE_FAILED");
  });

  it("after a reconnect: inventory of the running instances, then the final reports missed meanwhile", async () => {
    const before = controller.sessions.length;
    const lobby4 = stateOf("lobby-4", "RUNNING")!.pid;
    controller.refuseConnections = true;
    controller.dropSession();
    await eventually(
      () => controller.refusedConnections >= 1,
      () => "a refused reconnect",
    );
    // The instance ends while nobody listens: its report waits for the next session.
    process.kill(lobby4, "SIGTERM");
    await eventually(
      () => !isAlive(lobby4),
      () => "lobby-4 to exit",
    );
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    controller.refuseConnections = false;
    const session = await eventually(
      () => controller.sessions.slice(before).find((s) => s.messages.some((m) => m.payload === "node_status")),
      () => `a new session\n${daemon.output()}`,
    );
    assert.deepEqual(
      session.messages.slice(0, 4).map((m) => m.payload),
      ["hello", "inventory", "crash_report", "instance_state"],
    );
    const inventory = controller.messagesOf("inventory", session)[0]!.instances;
    assert.deepEqual(
      inventory.map((i) => [i.instance_id, i.state, i.fencing_token, i.pid]),
      [["lobby-3", "RUNNING", TOKEN, stateOf("lobby-3", "RUNNING")!.pid]],
    );
    assert.equal(controller.messagesOf("crash_report", session)[0]!.instance_id, "lobby-4");
    assert.equal(controller.messagesOf("crash_report", session)[0]!.classification, "NORMAL_EXIT_UNEXPECTED");
    const final = controller.messagesOf("instance_state", session)[0]!;
    assert.deepEqual([final.instance_id, final.state, final.exit_code], ["lobby-4", "CRASHED", 0]);
    // Console lines printed while disconnected (the server's stop message) were dropped.
    assert.ok(!controller.linesOf("lobby-4").some((line) => line.includes("Stopping server")));
  });

  it("SIGTERM stops every instance (reporting STOPPED) and leaves no simulated server alive", async () => {
    for (const s of states()) if (s.pid > 0) pids.add(s.pid);
    const how = await daemon.stop();
    assert.deepEqual(how, { code: 0, signal: null }, daemon.output());
    assert.ok(stateOf("lobby-3", "STOPPED"), "the controller heard of the stop before the stream closed");
    await eventually(
      () => [...pids].every((pid) => !isAlive(pid)),
      () => `every simulated server to be gone (${[...pids].filter(isAlive).join(",")})`,
      5_000,
    );
  });
});

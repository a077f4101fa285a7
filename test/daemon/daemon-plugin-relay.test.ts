// `cloud-daemon` as a real child process, with its plugin relay on a chosen loopback port: an
// instance's CLOUD_CONTROLLER_URL names the relay (never a controller), the simulated server's
// ready call reaches the fake controller's HTTP side through it, and after the stream moves to a
// session whose controller announces another HTTP port, the next plugin call goes there. A local
// process that is not the instance's, holding the instance's token (read from /proc, as any process
// of the daemon's user can), is refused by the relay. Every wait is bounded; every process is
// stopped in `after`.
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { request as httpRequest } from "node:http";
import { after, before, describe, it } from "node:test";
import { FakeController, FakeTemplateServer, SIM_WIRE_ENV, spawnDaemonChild, wireSpec, type DaemonChild } from "./fake-controller.js";
import { freePort, isAlive } from "./runner-harness.js";
import { eventually } from "../support/wait.js";

const API_TOKEN = "api-token-relay";
const TOKEN = 3;
/** A workload token shaped as the controller's (`wl.<claims>.<signature>`), naming lobby-1. */
const WORKLOAD_TOKEN = `wl.${Buffer.from(JSON.stringify({ iid: "lobby-1", grp: "lobby", exp: Date.now() + 3_600_000 })).toString("base64url")}.signature`;

/** The environment a process started with (Linux /proc). */
async function environmentOf(pid: number): Promise<Map<string, string>> {
  const raw = await readFile(`/proc/${pid}/environ`, "utf8");
  return new Map(
    raw
      .split("\0")
      .filter((entry) => entry.includes("="))
      .map((entry) => [entry.slice(0, entry.indexOf("=")), entry.slice(entry.indexOf("=") + 1)]),
  );
}

describe("cloud-daemon's plugin relay", { timeout: 120_000 }, () => {
  let first: FakeTemplateServer;
  let second: FakeTemplateServer;
  let controller: FakeController;
  let daemon: DaemonChild;
  let relayPort: number;
  const pids = new Set<number>();

  const stateOf = (instanceId: string, state: string) => controller.messagesOf("instance_state").find((s) => s.instance_id === instanceId && s.state === state);
  const waitForState = (instanceId: string, state: string) =>
    eventually(
      () => stateOf(instanceId, state),
      () => `${instanceId} ${state} (saw ${controller.statesOf(instanceId).join(",")})\n${daemon.output()}`,
    );

  before(async () => {
    first = await FakeTemplateServer.start(API_TOKEN);
    second = await FakeTemplateServer.start(API_TOKEN);
    controller = await FakeController.start({ httpPort: first.port, apiToken: API_TOKEN });
    relayPort = await freePort();
    daemon = spawnDaemonChild(controller, "node-relay", { pluginRelay: { port: relayPort } });
  });

  after(async () => {
    await daemon?.stop();
    for (const s of controller?.messagesOf("instance_state") ?? []) if (s.pid > 0) pids.add(s.pid);
    for (const pid of pids) if (isAlive(pid)) process.kill(pid, "SIGKILL");
    await controller?.stop();
    await first?.stop();
    await second?.stop();
    daemon?.remove();
  });

  it("gives an instance the relay as CLOUD_CONTROLLER_URL; its ready call reaches the controller through the relay", async () => {
    await eventually(
      () => controller.sessions.some((s) => s.messages.some((m) => m.payload === "node_status")),
      () => `a session\n${daemon.output()}`,
    );
    // Without its event stream, the server's plugin calls are the ready call and the player reports counted below.
    const spec = wireSpec("lobby-1", await freePort(), {
      platform: "simulated",
      workload_token: WORKLOAD_TOKEN,
      environment: { ...SIM_WIRE_ENV, CLOUD_SIM_EVENT_STREAM: "false" },
    });
    assert.equal((await controller.command("start_instance", { group: "lobby", fencing_token: TOKEN, spec })).ok, true);
    const starting = await waitForState("lobby-1", "STARTING");
    pids.add(starting.pid);

    const env = await environmentOf(starting.pid);
    assert.equal(env.get("CLOUD_CONTROLLER_URL"), `http://127.0.0.1:${relayPort}`);
    assert.equal(env.get("CLOUD_WORKLOAD_TOKEN"), WORKLOAD_TOKEN);
    assert.match(daemon.output(), new RegExp(`Plugin relay listening on http://127\\.0\\.0\\.1:${relayPort}`));

    const ready = await eventually(
      () => first.requests.find((r) => r.path === "/api/plugin/ready"),
      () => `the ready call at the controller\n${daemon.output()}`,
    );
    assert.equal(ready.authorization, `Bearer ${WORKLOAD_TOKEN}`);
    assert.equal(ready.forwardedFor, "127.0.0.1", "the call came through the relay");
    assert.equal((await controller.command("mark_instance_ready", { group: "lobby", fencing_token: TOKEN, instance_id: "lobby-1" })).ok, true);
    await waitForState("lobby-1", "RUNNING");
  });

  it("sends the next plugin call to the controller of the new session", async () => {
    const sessionsBefore = controller.sessions.length;
    controller.httpPort = second.port;
    controller.dropSession();
    await eventually(
      () => controller.sessions.slice(sessionsBefore).some((s) => s.messages.some((m) => m.payload === "node_status")),
      () => `a new session\n${daemon.output()}`,
    );
    assert.equal(
      (await controller.command("stdin_instance", { group: "lobby", fencing_token: TOKEN, instance_id: "lobby-1", line: "players join Alex" })).ok,
      true,
    );
    const joined = await eventually(
      () => second.requests.find((r) => r.path === "/api/plugin/player-join"),
      () => `the player join at the second controller\n${daemon.output()}`,
    );
    assert.equal(joined.authorization, `Bearer ${WORKLOAD_TOKEN}`);
    assert.equal(joined.forwardedFor, "127.0.0.1");
    assert.equal(first.requests.filter((r) => r.path.startsWith("/api/plugin/")).length, 1, "only the ready call went to the first controller");
  });

  it("refuses the instance's token from a local process that is not the instance's, and forwards nothing", async () => {
    const running = await waitForState("lobby-1", "RUNNING");
    // What any process of the daemon's user can do: read the instance's environment.
    const stolen = (await environmentOf(running.pid)).get("CLOUD_WORKLOAD_TOKEN")!;
    const before = [...first.requests, ...second.requests].length;
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpRequest(
        `http://127.0.0.1:${relayPort}/api/plugin/player-join`,
        { method: "POST", headers: { authorization: `Bearer ${stolen}`, "content-type": "application/json" }, agent: false },
        (res) => {
          let body = "";
          res.on("data", (chunk: Buffer) => (body += chunk.toString()));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
        },
      );
      req.on("error", reject);
      req.end(JSON.stringify({ uuid: "00000000-0000-4000-8000-000000000001", name: "mallory" }));
    });
    assert.equal(answer.status, 403, answer.body);
    assert.equal(JSON.parse(answer.body).error.code, "FORBIDDEN");
    assert.equal([...first.requests, ...second.requests].length, before, "nothing reached a controller");
  });

  it("SIGTERM stops the instance, closes the relay with its kept-alive connections and exits 0 without being killed", async () => {
    const how = await daemon.stop();
    // A relay that kept the daemon from finishing its shutdown would end in the harness's SIGKILL.
    assert.deepEqual(how, { code: 0, signal: null }, daemon.output());
    await eventually(() => [...pids].every((pid) => !isAlive(pid)), "the simulated server to be gone", 5_000);
  });
});

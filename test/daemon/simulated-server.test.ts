// The simulated game server on its own: a real child process on an ephemeral loopback port, driven
// through stdin, with a tiny hono server standing in for the controller's plugin API.
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { connect } from "node:net";
import { after, describe, it } from "node:test";
import { Hono } from "hono";
import { serve, type ServerType } from "@hono/node-server";
import { simulatedServerScriptPath } from "../../src/daemon/simulated-server/contract.js";
import { SIM_TEST_ENV, freePort, isAlive } from "./runner-harness.js";
import { eventually } from "../support/wait.js";

interface Sim {
  child: ChildProcess;
  lines: string[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  send(line: string): void;
  waitForLine(text: string): Promise<void>;
}

const started: ChildProcess[] = [];
after(async () => {
  for (const child of started) {
    if (child.pid !== undefined && isAlive(child.pid)) child.kill("SIGKILL");
  }
  await eventually(() => started.every((child) => child.pid === undefined || !isAlive(child.pid)), "every simulated server to be gone", 5_000);
});

async function startSim(env: Record<string, string> = {}): Promise<Sim & { port: number }> {
  const port = await freePort();
  const child = spawn(process.execPath, [simulatedServerScriptPath()], {
    env: { PATH: process.env.PATH ?? "", ...SIM_TEST_ENV, CLOUD_INSTANCE_ID: "sim-1", CLOUD_GROUP: "lobby", CLOUD_PORT: String(port), ...env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  started.push(child);
  const lines: string[] = [];
  let pending = "";
  child.stdout!.on("data", (chunk: Buffer) => {
    pending += chunk.toString();
    const parts = pending.split("\n");
    pending = parts.pop() ?? "";
    lines.push(...parts);
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  return {
    child,
    port,
    lines,
    exited,
    send: (line) => child.stdin!.write(`${line}\n`),
    waitForLine: (text) =>
      eventually(() => lines.some((line) => line.includes(text)), `console line "${text}" (got: ${lines.join(" | ")})`, 10_000).then(() => undefined),
  };
}

async function statusLine(port: number): Promise<string> {
  return await new Promise((resolve, reject) => {
    const socket = connect({ host: "127.0.0.1", port });
    let text = "";
    socket.on("data", (chunk) => (text += chunk.toString()));
    socket.on("end", () => resolve(text));
    socket.on("error", reject);
  });
}

async function pluginApi(
  handler: (path: string, authorization: string | undefined, body: unknown) => number,
): Promise<{ url: string; close(): Promise<void> }> {
  const app = new Hono();
  app.post("/api/plugin/:route", async (c) => c.json({}, handler(c.req.param("route"), c.req.header("authorization"), await c.req.json()) as 200));
  const server = await new Promise<ServerType>((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s));
  });
  const address = server.address();
  const port = typeof address === "object" && address !== null ? address.port : 0;
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

describe("simulated game server", { timeout: 55_000 }, () => {
  it("binds its port, answers a status line, prints banner, Done and ticks, obeys say, players, list and stop", async () => {
    const sim = await startSim();
    await sim.waitForLine("Done (");
    assert.match(sim.lines[0], /Starting simulated game server .* \(instance sim-1, group lobby/);
    assert.match(await statusLine(sim.port), /^SIMULATED sim-1 group=lobby players=0\/100 uptimeMs=\d+\n$/);
    await sim.waitForLine("[tick] 1 players=0");
    sim.send("say hello world");
    await sim.waitForLine("[Server] hello world");
    sim.send("players join Steve");
    sim.send("players join Alex");
    sim.send("players leave Alex");
    sim.send("list");
    await sim.waitForLine("There are 1 of a max of 100 players online: Steve");
    assert.match(await statusLine(sim.port), /players=1\/100/);
    sim.send("players join bad name!");
    sim.send("frobnicate");
    await sim.waitForLine('Unknown command "frobnicate"');
    sim.send("stop");
    assert.deepEqual(await sim.exited, { code: 0, signal: null });
    assert.ok(sim.lines.some((line) => line.includes("Stopping server (stop command)")));
  });

  it("crash [code] exits with that code (default 1); oom prints an OutOfMemoryError and dies of SIGKILL", async () => {
    const three = await startSim();
    const one = await startSim();
    const oom = await startSim();
    await Promise.all([three.waitForLine("Done ("), one.waitForLine("Done ("), oom.waitForLine("Done (")]);
    three.send("crash 3");
    one.send("crash");
    oom.send("oom");
    assert.deepEqual(await three.exited, { code: 3, signal: null });
    assert.deepEqual(await one.exited, { code: 1, signal: null });
    assert.deepEqual(await oom.exited, { code: null, signal: "SIGKILL" });
    assert.ok(oom.lines.some((line) => line.includes('Exception in thread "Server thread" java.lang.OutOfMemoryError: Java heap space')));
  });

  it("stops when standard input closes (the daemon is gone) and on SIGTERM; CLOUD_SIM_IGNORE_STOP ignores both", async () => {
    const orphan = await startSim();
    const terminated = await startSim();
    const stubborn = await startSim({ CLOUD_SIM_IGNORE_STOP: "true" });
    await Promise.all([orphan.waitForLine("Done ("), terminated.waitForLine("Done ("), stubborn.waitForLine("Done (")]);
    orphan.child.stdin!.end();
    terminated.child.kill("SIGTERM");
    assert.deepEqual(await orphan.exited, { code: 0, signal: null });
    assert.deepEqual(await terminated.exited, { code: 0, signal: null });
    stubborn.send("stop");
    stubborn.child.kill("SIGTERM");
    await stubborn.waitForLine("Ignoring SIGTERM");
    assert.ok(stubborn.lines.some((line) => line.includes("Ignoring stop")));
    assert.ok(isAlive(stubborn.child.pid!));
    stubborn.child.kill("SIGKILL");
    assert.equal((await stubborn.exited).signal, "SIGKILL");
  });

  it("reports ready, player joins and leaves through the plugin API with the workload token, retrying ready", async () => {
    const calls: { path: string; authorization: string | undefined; body: unknown }[] = [];
    let readyFailuresLeft = 2;
    const api = await pluginApi((path, authorization, body) => {
      calls.push({ path, authorization, body });
      if (path === "ready" && readyFailuresLeft > 0) {
        readyFailuresLeft -= 1;
        return 503;
      }
      return 200;
    });
    try {
      const sim = await startSim({ CLOUD_CONTROLLER_URL: `${api.url}/`, CLOUD_WORKLOAD_TOKEN: "wl-secret" });
      await sim.waitForLine("Reported ready to the controller");
      sim.send("players join Steve");
      await eventually(() => calls.some((call) => call.path === "player-join"), "player-join", 10_000);
      sim.send("players leave Steve");
      await eventually(() => calls.some((call) => call.path === "player-leave"), "player-leave", 10_000);
      sim.send("stop");
      await sim.exited;

      assert.deepEqual(
        calls.map((call) => call.path),
        ["ready", "ready", "ready", "player-join", "player-leave"],
      );
      assert.ok(calls.every((call) => call.authorization === "Bearer wl-secret"));
      assert.deepEqual(calls[0].body, {});
      // Offline-mode UUID of "Steve" (version 3 over "OfflinePlayer:Steve"), as a Minecraft server computes it.
      assert.deepEqual(calls[3].body, { uuid: "5627dd98-e6be-3c21-b8a8-e92344183641", name: "Steve", group: "lobby" });
      assert.deepEqual(calls[4].body, { uuid: "5627dd98-e6be-3c21-b8a8-e92344183641" });
      assert.ok(!sim.lines.some((line) => line.includes("wl-secret")));
    } finally {
      await api.close();
    }
  });

  it("gives up reporting ready after a bounded number of attempts", async () => {
    let attempts = 0;
    const api = await pluginApi(() => {
      attempts += 1;
      return 503;
    });
    try {
      const sim = await startSim({ CLOUD_CONTROLLER_URL: api.url, CLOUD_WORKLOAD_TOKEN: "wl", CLOUD_SIM_READY_ATTEMPTS: "5" });
      await sim.waitForLine("Could not report ready to the controller");
      assert.equal(attempts, 5);
      sim.send("stop");
      await sim.exited;
    } finally {
      await api.close();
    }
  });
});

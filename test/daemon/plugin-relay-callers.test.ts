// The relay ties each call to the calling instance (docs/decisions/plugin-relay.md, "Trust"): two
// real processes stand for the instances A and B (the relay knows their pids, as the daemon's
// runner does), a stand-in controller records what reaches it. A's workload token works from A's
// processes (a child of A's process too); from B's process, or from a local process that is no
// instance's (this test's own), it is refused with 403 and never forwarded, also on a kept-alive
// connection that A's token used before. A call without a workload token (the event stream's
// ticket) must come from some instance.
import assert from "node:assert/strict";
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { createServer, request as httpRequest, type Server } from "node:http";
import { createInterface } from "node:readline";
import { after, before, describe, it } from "node:test";
import { PluginRelay } from "../../src/daemon/plugin-relay.js";
import { ProcessCallerCheck } from "../../src/daemon/relay-callers.js";

/** A `wl.` token naming `instanceId` (the relay reads the claim; the controller checks the signature). */
const tokenOf = (instanceId: string) =>
  `wl.${Buffer.from(JSON.stringify({ iid: instanceId, grp: "g", exp: Date.now() + 60_000 })).toString("base64url")}.signature`;

/**
 * A process standing for an instance: it makes the HTTP calls it is told on stdin (one JSON line
 * each) from its own sockets, kept alive between calls, or from a child process of its own, and
 * prints each answer's status.
 */
const INSTANCE_PROGRAM = `
const http = require("node:http");
const { spawnSync } = require("node:child_process");
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const rl = require("node:readline").createInterface({ input: process.stdin });
rl.on("line", (line) => {
  const call = JSON.parse(line);
  if (call.fromChild) {
    const child = spawnSync(process.execPath, ["-e", process.env.INSTANCE_PROGRAM, "once", line], { encoding: "utf8" });
    process.stdout.write(child.stdout);
    return;
  }
  once(call, agent);
});
function once(call, agent) {
  const req = http.request(call.url, { method: call.method, headers: call.headers, agent }, (res) => {
    res.resume();
    res.on("end", () => process.stdout.write(JSON.stringify({ status: res.statusCode }) + "\\n"));
  });
  req.on("error", (e) => process.stdout.write(JSON.stringify({ status: 0, error: e.message }) + "\\n"));
  req.end();
}
if (process.argv[1] === "once") { rl.close(); once(JSON.parse(process.argv[2]), false); }
`;

class InstanceProcess {
  private readonly answers: { status: number }[] = [];
  private waiters: (() => void)[] = [];
  private constructor(readonly child: ChildProcessWithoutNullStreams) {
    createInterface({ input: child.stdout }).on("line", (line) => {
      this.answers.push(JSON.parse(line) as { status: number });
      for (const waiter of this.waiters.splice(0)) waiter();
    });
  }
  static start(): InstanceProcess {
    // Detached like the daemon's instances: a session and process group of its own.
    return new InstanceProcess(
      spawn(process.execPath, ["-e", INSTANCE_PROGRAM, "serve"], {
        detached: true,
        stdio: ["pipe", "pipe", "pipe"],
        env: { ...process.env, INSTANCE_PROGRAM },
      }),
    );
  }
  get pid(): number {
    return this.child.pid!;
  }
  async call(url: string, options: { method?: string; token?: string; scheme?: string; fromChild?: boolean } = {}): Promise<number> {
    const expected = this.answers.length + 1;
    const headers: Record<string, string> = options.token ? { authorization: `${options.scheme ?? "Bearer"} ${options.token}` } : {};
    this.child.stdin.write(`${JSON.stringify({ url, method: options.method ?? "POST", headers, fromChild: options.fromChild ?? false })}\n`);
    while (this.answers.length < expected) {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no answer from instance process ${this.pid}`)), 20_000);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return this.answers[expected - 1]!.status;
  }
  stop(): void {
    try {
      process.kill(-this.pid, "SIGKILL");
    } catch {
      // Already gone.
    }
  }
}

/** One call from this test's own process (no instance's) on a fresh connection; `headers` as raw name/value pairs. */
function strayCall(url: string, token?: string, method = "POST", headers: string[] = token ? ["Authorization", `Bearer ${token}`] : []): Promise<number> {
  return new Promise((resolve, reject) => {
    // Raw headers get no Host of Node's own.
    const req = httpRequest(url, { method, headers: ["Host", new URL(url).host, ...headers], agent: false }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
    });
    req.on("error", reject);
    req.end();
  });
}

describe("the relay ties each call to the calling instance", { timeout: 120_000 }, () => {
  let controller: Server;
  const forwarded: { path: string; authorization?: string }[] = [];
  let relay: PluginRelay;
  let a: InstanceProcess;
  let b: InstanceProcess;
  let relayUrl: string;

  before(async () => {
    controller = createServer((req, res) => {
      forwarded.push({ path: req.url ?? "", authorization: req.headers.authorization });
      req.resume();
      req.on("end", () => res.writeHead(200, { "content-type": "application/json" }).end("{}"));
    });
    await new Promise<void>((resolve) => controller.listen(0, "127.0.0.1", resolve));
    a = InstanceProcess.start();
    b = InstanceProcess.start();
    const running = [
      { instanceId: "inst-a", pid: a.pid },
      { instanceId: "inst-b", pid: b.pid },
    ];
    relay = new PluginRelay({
      port: 0,
      waitMs: 5_000,
      waitingRequestsMax: 100,
      replayBodyBytesMax: 1024 * 1024,
      callers: new ProcessCallerCheck({ instances: () => running }),
    });
    await relay.start();
    relay.sessionOpened(`http://127.0.0.1:${(controller.address() as { port: number }).port}`);
    relayUrl = relay.url!;
  });
  after(async () => {
    a?.stop();
    b?.stop();
    await relay?.close();
    await new Promise<void>((resolve) => (controller ? controller.close(() => resolve()) : resolve()));
  });

  it("A's token works from A's process and from a child of it", async () => {
    assert.equal(await a.call(`${relayUrl}/api/plugin/ready`, { token: tokenOf("inst-a") }), 200);
    assert.equal(await a.call(`${relayUrl}/api/plugin/ready`, { token: tokenOf("inst-a"), fromChild: true }), 200);
    assert.deepEqual(
      forwarded.map((f) => f.path),
      ["/api/plugin/ready", "/api/plugin/ready"],
    );
  });

  it("A's token from B's process, or from a process that is no instance's, is refused and never forwarded", async () => {
    const before = forwarded.length;
    assert.equal(await b.call(`${relayUrl}/api/plugin/player-join`, { token: tokenOf("inst-a") }), 403, "another instance");
    assert.equal(await strayCall(`${relayUrl}/api/plugin/player-join`, tokenOf("inst-a")), 403, "a stray local process");
    assert.equal(await strayCall(`${relayUrl}/api/plugin/player-join`, tokenOf("inst-b")), 403, "a stray local process with B's token");
    assert.equal(
      await b.call(`${relayUrl}/api/plugin/player-join`, { token: tokenOf("inst-a"), scheme: "bearer" }),
      403,
      "the scheme in lower case, as the controller accepts it",
    );
    const twice = ["Authorization", `Bearer ${tokenOf("inst-b")}`, "Authorization", `Bearer ${tokenOf("inst-a")}`];
    assert.equal(await strayCall(`${relayUrl}/api/plugin/player-join`, undefined, "POST", twice), 403, "two Authorization headers");
    assert.equal(forwarded.length, before, "nothing reached the controller");
    assert.equal(await b.call(`${relayUrl}/api/plugin/player-join`, { token: tokenOf("inst-b") }), 200, "B's own token from B");
  });

  it("a kept-alive connection of A cannot carry B's token afterwards", async () => {
    // A's agent keeps one socket: the first call ties it to A, the second on it names B.
    assert.equal(await a.call(`${relayUrl}/api/plugin/ready`, { token: tokenOf("inst-a") }), 200);
    const before = forwarded.length;
    assert.equal(await a.call(`${relayUrl}/api/plugin/ready`, { token: tokenOf("inst-b") }), 403);
    assert.equal(forwarded.length, before);
  });

  it("a call without a workload token (the event stream's ticket) is relayed for an instance only", async () => {
    const before = forwarded.length;
    assert.equal(await b.call(`${relayUrl}/api/v1/events/stream?ticket=abc`, { method: "GET" }), 200);
    assert.equal(await strayCall(`${relayUrl}/api/v1/events/stream?ticket=abc`, undefined, "GET"), 403);
    assert.equal(forwarded.length, before + 1);
  });
});

describe("a call made before the runner knows the instance's pid waits for it", { timeout: 120_000 }, () => {
  let controller: Server;
  const forwarded: string[] = [];
  let relay: PluginRelay;
  let c: InstanceProcess;
  let relayUrl: string;
  // The launcher learns the pid after the process already runs: it starts as null here.
  const running: { instanceId: string; pid: number | null }[] = [
    { instanceId: "inst-c", pid: null },
    { instanceId: "inst-never", pid: null },
  ];

  before(async () => {
    controller = createServer((req, res) => {
      forwarded.push(req.url ?? "");
      req.resume();
      req.on("end", () => res.writeHead(200, { "content-type": "application/json" }).end("{}"));
    });
    await new Promise<void>((resolve) => controller.listen(0, "127.0.0.1", resolve));
    c = InstanceProcess.start();
    relay = new PluginRelay({
      port: 0,
      waitMs: 5_000,
      waitingRequestsMax: 100,
      replayBodyBytesMax: 1024 * 1024,
      callers: new ProcessCallerCheck({ instances: () => running, spawningPidWaitMs: 1_500 }),
    });
    await relay.start();
    relay.sessionOpened(`http://127.0.0.1:${(controller.address() as { port: number }).port}`);
    relayUrl = relay.url!;
  });
  after(async () => {
    c?.stop();
    await relay?.close();
    await new Promise<void>((resolve) => (controller ? controller.close(() => resolve()) : resolve()));
  });

  it("is relayed once the pid is known, and refused when it never is", async () => {
    const pending = c.call(`${relayUrl}/api/plugin/ready`, { token: tokenOf("inst-c") });
    setTimeout(() => (running[0]!.pid = c.pid), 300);
    assert.equal(await pending, 200, "the instance's first call, made while its pid was unknown");
    assert.deepEqual(forwarded, ["/api/plugin/ready"]);
    assert.equal(await strayCall(`${relayUrl}/api/plugin/ready`, tokenOf("inst-never")), 403, "an instance whose process never appears");
    assert.equal(await strayCall(`${relayUrl}/api/plugin/ready`, tokenOf("inst-unknown")), 403, "an instance not on this node");
    assert.deepEqual(forwarded, ["/api/plugin/ready"], "nothing else reached the controller");
  });
});

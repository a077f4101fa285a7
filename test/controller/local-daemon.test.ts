// The development profile's local daemon (what `npm start` runs next to the controller): it joins
// with a token the controller makes, runs a group's instances, keeps its identity across a restart
// (no new token), and stopping it leaves no server process behind.
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Writable } from "node:stream";
import { after, describe, it } from "node:test";
import { localDaemonArgs, startLocalDaemon, type LocalDaemon } from "../../src/controller/local-daemon.js";
import { api, cleanupDirs, startGatewayController, tempDir, type GatewayController } from "../gateway/harness.js";
import { eventually } from "../support/wait.js";

const ROOT_DIR = join(import.meta.dirname, "..", "..");
const waitMs = 40_000;

describe("local daemon", { timeout: 120_000 }, () => {
  let c: GatewayController;
  const daemons: LocalDaemon[] = [];
  after(async () => {
    for (const d of daemons) await d.stop();
    await c?.stop();
    cleanupDirs();
  });

  it("joins as node 'local', runs instances, rejoins with its stored identity and stops cleanly", async () => {
    c = await startGatewayController({ scheduler: { evaluationIntervalMs: 1_000 } });
    const dir = tempDir("cloud-local-daemon-");
    const output: string[] = [];
    const sink = new Writable({
      write: (chunk: Buffer, _encoding, done) => {
        output.push(chunk.toString());
        done();
      },
    });
    const start = () =>
      startLocalDaemon({
        dir,
        rootDir: ROOT_DIR,
        grpcPort: c.controller.grpcPort,
        nodeTokens: c.controller.nodeTokens,
        logger: c.controller.logs.logger("cloud.dev"),
        maxMemoryMb: 1024,
        output: sink,
      });
    const first = await start();
    daemons.push(first);
    assert.match(readFileSync(join(dir, "daemon.yml"), "utf8"), /token: cnt_/, "the first start carries a join token");
    await eventually(async () => (await api(c, "GET", "/api/v1/nodes/local")).json?.state === "ONLINE", `node local ONLINE\n${output.join("")}`, waitMs);
    await api(c, "POST", "/api/v1/groups", { name: "demo", platform: "simulated", minInstances: 1, memoryMb: 128, portRange: { start: 25000, end: 25010 } });
    await eventually(async () => ((await api(c, "GET", "/api/v1/services?group=demo&state=RUNNING")).json as unknown[]).length === 1, "demo RUNNING", waitMs);

    await first.stop();
    assert.ok(existsSync(join(dir, "data", "node-id")), "the identity stays");
    const tokensBefore = ((await api(c, "GET", "/api/v1/admin/tokens")).json as unknown[]).length;
    const second = await start();
    daemons.push(second);
    assert.doesNotMatch(readFileSync(join(dir, "daemon.yml"), "utf8"), /token:/, "a joined daemon needs no token");
    assert.equal(((await api(c, "GET", "/api/v1/admin/tokens")).json as unknown[]).length, tokensBefore, "no new token");
    await eventually(
      async () => ((await api(c, "GET", "/api/v1/services?group=demo&state=RUNNING")).json as unknown[]).length === 1,
      "demo RUNNING again",
      waitMs,
    );
    await second.stop();
    assert.equal(second.child.exitCode, 0, output.join(""));
  });

  it("runs the daemon entry of its own tree: src/daemon/main.ts through tsx from source", () => {
    assert.deepEqual(localDaemonArgs(), ["--import", "tsx", join(ROOT_DIR, "src", "daemon", "main.ts")]);
  });
});

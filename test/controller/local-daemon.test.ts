// The development profile's local daemon (what `npm start` runs next to the controller): it joins
// with a token the controller makes, runs a group's instances, keeps its identity across a restart
// (no new token), and stopping it leaves no server process behind. Its lines are the controller's:
// the HUMAN layout by default, JSON with the controller's fields when the controller logs JSON.
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Writable } from "node:stream";
import { after, describe, it } from "node:test";
import { createLogService } from "../../src/logs/logger.js";
import { localDaemonArgs, startLocalDaemon, type LocalDaemon } from "../../src/controller/local-daemon.js";
import { api, cleanupDirs, startGatewayController, tempDir, type GatewayController } from "../gateway/harness.js";
import { eventually } from "../support/wait.js";

const ROOT_DIR = join(import.meta.dirname, "..", "..");
const waitMs = 40_000;
/** A line of the controller's HUMAN layout: `2026-11-27 13:12:28.661 [main] INFO  daemon - …`. */
const HUMAN_LINE = /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \[[\w-]+\] (TRACE|DEBUG|INFO |WARN |ERROR) [\w-]+ - \S/m;

/** A line as the controller's own log service writes it in the HUMAN layout. */
function controllerHumanLine(): string {
  let line = "";
  createLogService({ level: "INFO", format: "HUMAN" }, { write: (chunk: string) => (line += chunk) })
    .logger("cloud.controller")
    .info("ready");
  return line;
}

/** The field names of a JSON log line, in order (an exception's field aside). */
const fieldsOf = (line: string) => Object.keys(JSON.parse(line) as object).filter((k) => k !== "exception" && k !== "mdc");
const linesOf = (output: readonly string[]) =>
  output
    .join("")
    .split("\n")
    .filter((l) => l !== "");

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
    const start = (logging?: { level: string; format: string }) =>
      startLocalDaemon({
        ...(logging ? { logging } : {}),
        dir,
        rootDir: ROOT_DIR,
        grpcPort: c.controller.grpcPort,
        nodeTokens: c.controller.nodeTokens,
        logger: c.controller.logs.logger("cloud.dev"),
        maxMemoryMb: 1024,
        output: sink,
      });
    const first = await start({ level: c.controller.logs.level, format: c.controller.logs.format });
    daemons.push(first);
    assert.match(readFileSync(join(dir, "daemon.yml"), "utf8"), /token: cnt_/, "the first start carries a join token");
    await eventually(async () => (await api(c, "GET", "/api/v1/nodes/local")).json?.state === "ONLINE", `node local ONLINE\n${output.join("")}`, waitMs);
    await api(c, "POST", "/api/v1/groups", { name: "demo", platform: "simulated", minInstances: 1, memoryMb: 128, portRange: { start: 25200, end: 25210 } });
    await eventually(async () => ((await api(c, "GET", "/api/v1/services?group=demo&state=RUNNING")).json as unknown[]).length === 1, "demo RUNNING", waitMs);

    await first.stop();
    // Started as `npm start` starts it, with the controller's logging keys (this controller logs JSON).
    assert.equal(c.controller.logs.format, "JSON");
    const controllerFields = fieldsOf(
      c
        .logs()
        .split("\n")
        .find((l) => l.includes('"Controller HTTP API listening')) ?? "",
    );
    const jsonLines = linesOf(output);
    assert.ok(jsonLines.length >= 3, jsonLines.join("\n"));
    for (const line of jsonLines) {
      assert.deepEqual(fieldsOf(line), controllerFields, `the controller's JSON fields, in its order: ${line}`);
      assert.equal((JSON.parse(line) as { logger: string }).logger, "cloud.daemon");
    }
    output.length = 0;
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
    // Without them, daemon.yml's defaults: the controller's default HUMAN layout.
    const humanLines = linesOf(output);
    assert.ok(humanLines.length >= 3, humanLines.join("\n"));
    assert.match(controllerHumanLine(), HUMAN_LINE, "the controller's own HUMAN line, for comparison");
    for (const line of humanLines) assert.match(line, HUMAN_LINE, "every line of the daemon in the controller's HUMAN layout");
    assert.ok(humanLines.some((l) => / INFO {2}daemon - /.test(l)));
  });

  it("runs the daemon entry of its own tree: src/daemon/main.ts through tsx from source", () => {
    assert.deepEqual(localDaemonArgs(), ["--import", "tsx", join(ROOT_DIR, "src", "daemon", "main.ts")]);
  });
});

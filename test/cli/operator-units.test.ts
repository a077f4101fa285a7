// The pure parts behind the operator's commands, in process: short-id matching, crash reasons,
// the platform check, event summaries, deployment change lines and health countdowns, role,
// permission and variable arithmetic, node figures, durations, the command lines of the bins, and
// the daemon's instance log store on real files (rotation, tail reads, the daemon's own lines).
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { changedLines, changeFacts, healthCell, type DeploymentView } from "../../src/cli/commands/deploy-view.js";
import { eventSummary, groupOf } from "../../src/cli/commands/event-summary.js";
import { formatNodeField } from "../../src/cli/commands/node.js";
import { nextPermissions } from "../../src/cli/commands/role.js";
import { nextVariables } from "../../src/cli/commands/template.js";
import { nextRoles } from "../../src/cli/commands/user.js";
import { eventWanted } from "../../src/cli/commands/events.js";
import { matchPrefix } from "../../src/cli/id-prefix.js";
import { parseDurationMs } from "../../src/cli/options.js";
import { InstanceLogStore, instanceLogBytesMax, recordRunnerEvent } from "../../src/daemon/instance-logs.js";
import { builtInPlatforms } from "../../src/daemon/platforms.js";
import { instancePlaceholders } from "../../src/daemon/work-directory.js";
import { checkPlatform } from "../../src/domain/groups/group-service.js";
import { crashReason, tailWithReason } from "../../src/scheduler/crash-reason.js";
import { EXIT_USAGE, parseBinCommandLine } from "../../src/shared/command-line.js";
import { DAEMON_PLATFORM_IDS } from "../../src/wire/platform-catalog.js";
import { INSTANCE_PLACEHOLDERS, substituteVariables } from "../../src/wire/template-text.js";

describe("operator commands, their pure parts", () => {
  const dirs: string[] = [];
  after(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

  test("short ids: an exact id wins, else every id it begins", () => {
    const ids = ["lobby-1a2b", "lobby-1a2c", "lobby-ff00", "lobby"];
    assert.deepEqual(matchPrefix(ids, "lobby"), ["lobby"], "an exact id wins over the ids it begins");
    assert.deepEqual(matchPrefix(ids, "lobby-f"), ["lobby-ff00"]);
    assert.deepEqual(matchPrefix(ids, "lobby-1a"), ["lobby-1a2b", "lobby-1a2c"]);
    assert.deepEqual(matchPrefix(ids, "arena"), []);
  });

  test("a crash's reason: the daemon's refusal when the process never ran, else the exit and its last line", () => {
    const refused = crashReason({ kind: "FAILURE", reason: "UNKNOWN_PLATFORM: Unknown platform papr" }, -1, []);
    assert.equal(refused, "UNKNOWN_PLATFORM: Unknown platform papr");
    assert.deepEqual(tailWithReason({ kind: "FAILURE", reason: "x" }, [], refused), ["[cloud] UNKNOWN_PLATFORM: Unknown platform papr"]);
    assert.deepEqual(tailWithReason({ kind: "EXIT", exitCode: 1 }, ["a"], "exit 1: a"), ["a"], "a process that ran keeps its own tail");
    assert.equal(
      crashReason({ kind: "EXIT", exitCode: 1 }, 1, ["Error: Unable to access jarfile server.jar", ""]),
      "exit 1: Error: Unable to access jarfile server.jar",
    );
    assert.equal(crashReason({ kind: "EXIT", exitCode: 137 }, 137, []), "exit 137 without printing anything");
    assert.equal(crashReason({ kind: "FAILURE", reason: "TIMEOUT:startTimeout" }, -1, []), "TIMEOUT: no progress within the startTimeout bound");
    assert.equal(crashReason({ kind: "EXIT", exitCode: 2 }, 2, ["x".repeat(1_000)]).length, 300, "a long line is cut to the bound");
  });

  test("a group's platform must be one a daemon runs; the daemon's own list is the shared one", () => {
    assert.deepEqual([...builtInPlatforms().keys()].sort(), [...DAEMON_PLATFORM_IDS].sort());
    for (const id of DAEMON_PLATFORM_IDS) checkPlatform(id);
    assert.throws(
      () => checkPlatform("papr"),
      (err: Error & { status?: number; code?: string }) => {
        assert.equal(err.status, 422);
        assert.equal(err.code, "VALIDATION_ERROR");
        assert.match(err.message, /unknown platform "papr" \(did you mean paper\?\); the cluster runs simulated, .*paper, velocity/);
        return true;
      },
    );
    assert.throws(
      () => checkPlatform("forge"),
      (err: Error) => !/did you mean/.test(err.message),
    );
  });

  test("every instance's placeholders: its facts win over the template's variables", () => {
    const filled = instancePlaceholders({ instanceId: "lobby-1", group: "lobby", port: 30001, memoryMb: 512, platform: "paper" });
    assert.deepEqual(Object.keys(filled).sort(), [...INSTANCE_PLACEHOLDERS].sort());
    const variables = { ...{ group: "from-the-template", greeting: "hi" }, ...filled };
    assert.equal(substituteVariables("{{ group }}:{{port}} {{greeting}} {{missing}}", variables), "lobby:30001 hi {{missing}}");
  });

  test("events: key fields in words, the group, periodic reports only when asked for", () => {
    const changed = {
      type: "INSTANCE_STATE_CHANGED",
      data: { instanceId: "lobby-1", group: "lobby", nodeId: "local", oldState: "STARTING", newState: "RUNNING" },
    };
    assert.equal(eventSummary(changed), "lobby-1 STARTING → RUNNING on local");
    assert.equal(groupOf({ data: { groupName: "arena" } }), "arena");
    assert.equal(eventSummary({ type: "SHOP:BUY", source: "lobby-1", data: { item: "sword", count: 2 } }), "item=sword count=2 (from lobby-1)");
    const status = { type: "NODE_STATUS", sequence: 1, data: { nodeId: "n", cpuUsage: 0.8320687910976227 } };
    assert.equal(eventWanted(status, { types: [] }), false);
    assert.equal(eventWanted(status, { types: ["NODE_STATUS"] }), true);
    assert.equal(eventWanted(status, { types: [], all: true }), true);
    assert.equal(eventWanted({ ...changed, sequence: 2 }, { types: [], group: "arena" }), false);
    assert.equal(eventWanted({ ...changed, sequence: 2, timestamp: "2026-01-01T00:00:00.000Z" }, { types: [], since: "2026-06-01T00:00:00.000Z" }), false);
  });

  test("deployments: the health countdown, and change lines that never repeat", () => {
    const now = Date.parse("2026-11-27T12:00:00.000Z");
    const instance = { id: "web-1", node: "local", state: "RUNNING", deploymentRevision: 2, role: "NEW", healthy: false, retired: false, playerCount: 0 };
    assert.equal(healthCell({ ...instance, healthyAt: "2026-11-27T12:00:07.200Z" }, now), "in 8s");
    assert.equal(healthCell({ ...instance, state: "STARTING", healthyAt: null }, now), "after RUNNING");
    assert.equal(healthCell({ ...instance, healthy: true }, now), "yes");
    const frame = (healthy: boolean, retired: boolean): DeploymentView => ({
      group: "web",
      revision: 2,
      state: "IN_PROGRESS",
      phase: "ROLLING",
      desiredInstances: 1,
      settings: { batchSize: 1 },
      progress: { newInstances: 1, newHealthy: healthy ? 1 : 0, oldInstances: retired ? 0 : 1, retired: retired ? 1 : 0 },
      instances: [
        { ...instance, healthy, healthyAt: "2026-11-27T12:00:07.000Z" },
        { ...instance, id: "web-0", role: "OLD", deploymentRevision: 1, retired, state: retired ? "STOPPED" : "RUNNING" },
      ],
    });
    const first = changedLines(null, changeFacts(frame(false, false)));
    assert.match(first[0], /deployment 2 of web: IN_PROGRESS ROLLING; batch 1 of 1 \(1 at a time\); 0\/1 new healthy, 1 old left, 0 retired/);
    assert.equal(first.length, 3, "the first frame says everything once");
    assert.deepEqual(changedLines(changeFacts(frame(false, false)), changeFacts(frame(false, false))), [], "an unchanged frame prints nothing");
    const later = changedLines(changeFacts(frame(false, false)), changeFacts(frame(true, true)));
    assert.equal(later.length, 3);
    assert.ok(later.some((line) => /web-0 OLD STOPPED on local, retired/.test(line)));
    assert.ok(later.some((line) => /web-1 NEW RUNNING on local, healthy$/.test(line)));
    assert.match(
      changeFacts({ group: "web", revision: 3, state: "IN_PROGRESS", desiredInstances: null }).get("deployment")!,
      /waiting for the rollout's first step/,
    );
  });

  test("roles, permissions and variables change as the flags say", () => {
    assert.deepEqual(nextRoles(["VIEWER"], { add: ["OPERATOR", "viewer"], remove: [] }), ["VIEWER", "OPERATOR"]);
    assert.deepEqual(nextRoles(["VIEWER", "OPERATOR"], { add: [], remove: ["operator"] }), ["VIEWER"]);
    assert.deepEqual(nextRoles(["VIEWER"], { add: ["X"], remove: [], set: ["ADMIN"] }), ["ADMIN", "X"]);
    assert.deepEqual(nextPermissions(["a", "b"], { permission: [], add: ["c", "a"], remove: ["b"] }), ["a", "c"]);
    assert.deepEqual(nextPermissions(["a"], { permission: ["x", "y"], add: [], remove: [] }), ["x", "y"]);
    assert.deepEqual(nextVariables({ a: "1", b: "2" }, { set: ["c=x=y", "a=0"], unset: ["b"] }), { a: "0", c: "x=y" });
    assert.throws(() => nextVariables({}, { set: ["novalue"], unset: [] }), /expected name=value/);
  });

  test("node figures for people, durations of --wait", () => {
    assert.equal(formatNodeField("cpuUsage", 0.8320687910976227), "83.2 %");
    assert.equal(formatNodeField("usedMemoryMb", 512), "512 MB");
    assert.equal(formatNodeField("load", 1.23456), "1.23");
    assert.equal(formatNodeField("state", "ONLINE"), "ONLINE");
    assert.equal(parseDurationMs("500ms"), 500);
    assert.equal(parseDurationMs("5s"), 5_000);
    assert.equal(parseDurationMs("0"), 0);
    assert.throws(() => parseDurationMs("5"), /duration/);
  });

  test("the bins' command line: help and version exit 0, anything unknown 64 with a suggestion", () => {
    const line = { name: "cloud-controller", description: "d", configHelp: "c", version: "1.2.3", helpAfter: "Environment: …" };
    const run = (args: string[]) => {
      let out = "";
      let err = "";
      const result = parseBinCommandLine(line, args, { out: (t) => (out += t), err: (t) => (err += t) });
      return { result, out, err };
    };
    assert.deepEqual(run(["--config", "a.yml"]).result, { kind: "run", config: "a.yml" });
    assert.deepEqual(run([]).result, { kind: "run", config: undefined });
    const help = run(["--help"]);
    assert.deepEqual(help.result, { kind: "exit", status: 0 });
    assert.match(help.out, /--config <path>[\s\S]*Environment: …/);
    assert.deepEqual(run(["-V"]), { result: { kind: "exit", status: 0 }, out: "cloud-controller 1.2.3\n", err: "" });
    const typo = run(["--confg", "a.yml"]);
    assert.deepEqual(typo.result, { kind: "exit", status: EXIT_USAGE });
    assert.match(typo.err, /unknown option '--confg'[\s\S]*Did you mean --config\?/);
    assert.deepEqual(run(["serve"]).result, { kind: "exit", status: EXIT_USAGE });
    assert.deepEqual(run(["--config"]).result, { kind: "exit", status: EXIT_USAGE });
  });

  test("instance logs: console and [cloud] lines, kept in order, read from the end, rotated past the bound", async () => {
    const dir = mkdtempSync(join(tmpdir(), "cloud-instance-logs-"));
    dirs.push(dir);
    let now = 1_000;
    const logs = new InstanceLogStore(dir, () => now);
    await logs.open();
    recordRunnerEvent(logs, { type: "state", instanceId: "lobby-1", group: "lobby", state: "PREPARING", previousState: null, timestampMs: now, port: 30001 });
    recordRunnerEvent(logs, { type: "console", instanceId: "lobby-1", group: "lobby", line: "Done (1.0s)!", stream: "stdout", timestampMs: ++now });
    recordRunnerEvent(logs, {
      type: "crash",
      report: { instanceId: "lobby-1", group: "lobby", exitCode: 2, signal: null, classification: "ERROR_EXIT", logTail: [], uptimeMs: 5, timestampMs: ++now },
    });
    logs.note("lobby-2", "start refused: UNKNOWN_PLATFORM: Unknown platform papr");
    const lines = (await logs.read("lobby-1", 10))!;
    assert.deepEqual(
      lines.map((l) => [l.stream, l.line]),
      [
        ["cloud", "[cloud] PREPARING (port 30001)"],
        ["stdout", "Done (1.0s)!"],
        ["cloud", "[cloud] crashed: ERROR_EXIT: exit code 2"],
      ],
    );
    assert.deepEqual(
      (await logs.read("lobby-1", 1))!.map((l) => l.line),
      ["[cloud] crashed: ERROR_EXIT: exit code 2"],
    );
    assert.match((await logs.read("lobby-2", 5))![0].line, /Unknown platform papr/);
    assert.equal(await logs.read("never-ran", 5), null);
    assert.equal(await logs.read("../escape", 5), null, "an id that is no file name reads nothing");

    const big = "x".repeat(4_096);
    for (let i = 0; i < 600; i++) logs.append("chatty-1", { line: `${i} ${big}`, stream: "stdout", timestampMs: ++now });
    await logs.idle();
    assert.ok(statSync(join(dir, "chatty-1.log")).size <= instanceLogBytesMax, "the current file stays within the bound");
    assert.ok(readdirSync(dir).includes("chatty-1.log.1"), "the older lines were rotated, one file kept");
    const tail = (await logs.read("chatty-1", 300))!;
    assert.equal(tail.length, 300);
    assert.match(tail.at(-1)!.line, /^599 /, "the newest line is last");
    assert.match(tail[0].line, /^300 /, "a tail longer than the current file reaches into the rotated one");
  });
});

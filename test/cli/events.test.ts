// cloudctl events against the real HTTP app: the buffered events as a table (each type's key fields,
// never cut) or JSON lines, --type, --group, --since, periodic reports hidden unless asked for,
// --follow (also with --since), a refused ticket.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { startTestApp, type TestApp } from "../support/http-app.js";
import { eventually } from "../support/wait.js";
import { homeWithContext, runCli, spawnCli, waitForExit } from "./harness.js";

describe("cloudctl events", () => {
  let t: TestApp;
  let home: string;
  let dispose: () => void;

  before(async () => {
    t = await startTestApp();
    ({ home, dispose } = homeWithContext(t.baseUrl, await t.tokenFor("VIEWER")));
    t.events.publish("GROUP_CREATED", { groupName: "lobby" });
    t.events.publish("INSTANCE_CONSOLE_OUTPUT", { instanceId: "lobby-1", line: "hidden", timestampMs: 1 });
    t.events.publish("SHOP:BUY", { item: "sword" }, "lobby-1");
    t.events.publish("NODE_STATUS", { nodeId: "local", cpuUsage: 0.8320687910976227, usedMemoryMb: 512, totalMemoryMb: 4096, lastHeartbeatAt: "x" });
    const longState = { instanceId: "arena-0123456789abcdef0123456789abcdef", group: "arena", nodeId: "node-with-a-long-name-0123456789" };
    t.events.publish("INSTANCE_STATE_CHANGED", { ...longState, oldState: "STARTING", newState: "RUNNING" });
    await eventually(() => t.eventStream.journal.latestSequence === 4, "four events journaled");
  });
  after(async () => {
    dispose?.();
    await t?.close();
  });

  test("prints the buffered events as JSON lines or a table; --type filters", async () => {
    const [json, table, typed] = await Promise.all([
      runCli(["events", "--json"], { home }),
      runCli(["events"], { home }),
      runCli(["events", "--type", "SHOP:BUY", "--json"], { home }),
    ]);
    assert.equal(json.code, 0, json.stderr);
    // The app itself publishes GROUP_AGGREGATES_UPDATED after a state change, whenever it gets to it.
    const lines = json.stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line))
      .filter((e) => e.type !== "GROUP_AGGREGATES_UPDATED");
    assert.deepEqual(
      lines.map((e) => [e.sequence, e.type]),
      [
        [1, "GROUP_CREATED"],
        [2, "SHOP:BUY"],
        [4, "INSTANCE_STATE_CHANGED"],
      ],
      "NODE_STATUS (a periodic report) is left out unless asked for",
    );
    assert.deepEqual(lines[1].data, { item: "sword" });
    assert.equal(table.code, 0, table.stderr);
    assert.match(table.stdout, /SEQ.*TIME.*TYPE.*GROUP.*EVENT/);
    assert.match(table.stdout, /GROUP_CREATED.*lobby.*group lobby created/);
    assert.match(table.stdout, /SHOP:BUY.*item=sword \(from lobby-1\)/);
    // The state change's key fields in full, the new state last: nothing is cut.
    assert.match(table.stdout, /INSTANCE_STATE_CHANGED.*arena.*arena-0123456789abcdef0123456789abcdef STARTING → RUNNING on node-with-a-long-name-0123456789/);
    assert.doesNotMatch(table.stdout, /NODE_STATUS|hidden/);
    assert.equal(typed.code, 0, typed.stderr);
    assert.deepEqual(
      typed.stdout
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line).type),
      ["SHOP:BUY"],
    );
  });

  test("--group, --since, --type (comma-separated) and --all filter; a malformed --since is a usage error (64)", async () => {
    const [group, typed, all, future, bad] = await Promise.all([
      runCli(["events", "--group", "arena", "--json"], { home }),
      runCli(["events", "--type", "NODE_STATUS,GROUP_CREATED"], { home }),
      runCli(["events", "--all", "--json"], { home }),
      runCli(["events", "--since", "2999-01-01T00:00:00Z", "--json"], { home }),
      runCli(["events", "--since", "yesterday-ish"], { home }),
    ]);
    const types = (r: { stdout: string }) =>
      r.stdout
        .trim()
        .split("\n")
        .filter(Boolean)
        .map((line) => JSON.parse(line).type)
        .filter((type) => type !== "GROUP_AGGREGATES_UPDATED");
    assert.equal(group.code, 0, group.stderr);
    assert.deepEqual(types(group), ["INSTANCE_STATE_CHANGED"]);
    assert.equal(typed.code, 0, typed.stderr);
    assert.match(typed.stdout, /NODE_STATUS.*local cpu 83\.2 %, memory 512\/4096 MB/);
    assert.match(typed.stdout, /GROUP_CREATED/);
    assert.doesNotMatch(typed.stdout, /SHOP:BUY/);
    assert.deepEqual(types(all), ["GROUP_CREATED", "SHOP:BUY", "NODE_STATUS", "INSTANCE_STATE_CHANGED"]);
    assert.equal(future.code, 0, future.stderr);
    assert.equal(future.stdout, "");
    assert.equal(bad.code, 64, bad.stderr);
    assert.match(bad.stderr, /--since/);
  });

  test("--follow --since replays the buffered events since then, then follows", async () => {
    const child = spawnCli(["events", "--follow", "--json", "--since", "1h", "--type", "SHOP:BUY,SHOP:TRADE"], { home });
    const exited = waitForExit(child);
    let stdout = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    try {
      await eventually(
        () => stdout.includes("sword"),
        () => `replayed: ${stdout}`,
      );
      t.events.publish("SHOP:TRADE", { item: "map" });
      await eventually(
        () => stdout.includes("map"),
        () => `followed: ${stdout}`,
      );
      assert.deepEqual(
        stdout
          .trim()
          .split("\n")
          .map((line) => JSON.parse(line).data.item),
        ["sword", "map"],
      );
    } finally {
      child.kill();
      await exited;
    }
  });

  test("--follow prints new events as they come", async () => {
    const child = spawnCli(["events", "--follow", "--json", "--type", "SHOP:SELL"], { home });
    const exited = waitForExit(child);
    let stdout = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    try {
      await eventually(() => t.eventStream.hub.clientCount === 1, "the CLI streaming");
      t.events.publish("SHOP:BUY", { item: "bow" });
      t.events.publish("SHOP:SELL", { item: "shield" });
      await eventually(
        () => stdout.includes("shield"),
        () => `follow output: ${stdout}`,
      );
      const lines = stdout
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line));
      assert.deepEqual(
        lines.map((e) => [e.type, e.data.item]),
        [["SHOP:SELL", "shield"]],
      );
    } finally {
      child.kill();
      await exited;
    }
  });

  test("a token the controller refuses exits 2", async () => {
    const other = homeWithContext(t.baseUrl, "not-a-token");
    try {
      const result = await runCli(["events"], { home: other.home });
      assert.equal(result.code, 2, result.stderr);
    } finally {
      other.dispose();
    }
  });
});

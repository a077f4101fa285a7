// cloudctl events against the real HTTP app: the buffered events as a table or JSON lines, --type, --follow, a refused ticket.
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
    await eventually(() => t.eventStream.journal.latestSequence === 2, "two events journaled");
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
    const lines = json.stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
    assert.deepEqual(
      lines.map((e) => [e.sequence, e.type]),
      [
        [1, "GROUP_CREATED"],
        [2, "SHOP:BUY"],
      ],
    );
    assert.deepEqual(lines[1].data, { item: "sword" });
    assert.equal(table.code, 0, table.stderr);
    assert.match(table.stdout, /SEQ.*TIME.*TYPE.*SOURCE.*DATA/);
    assert.match(table.stdout, /GROUP_CREATED.*controller.*\{"groupName":"lobby"\}/);
    assert.match(table.stdout, /SHOP:BUY.*lobby-1/);
    assert.doesNotMatch(table.stdout, /hidden/);
    assert.equal(typed.code, 0, typed.stderr);
    assert.deepEqual(
      typed.stdout
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line).type),
      ["SHOP:BUY"],
    );
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

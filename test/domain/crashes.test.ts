import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { CrashService, crashRetentionSeconds } from "../../src/domain/crashes/crash-service.js";
import { apiError } from "./assertions.js";
import { openFixture } from "./domain-fixtures.js";

type Fixture = Awaited<ReturnType<typeof openFixture>>;

describe("CrashService", () => {
  let fx: Fixture;
  let crashes: CrashService;
  const at = (iso: string) => Date.parse(iso);
  const report = (group: string, nodeId: string, iso: string) => ({
    instanceId: `${group}-1`,
    group,
    nodeId,
    exitCode: 137,
    classification: "OUT_OF_MEMORY",
    logTail: ["line 1", "line 2"],
    uptimeMs: 1234,
    timestampMs: at(iso),
  });

  before(async () => {
    fx = await openFixture();
    crashes = new CrashService(fx.store, fx.clock);
    await crashes.record(report("lobby", "node-a", "2026-01-10T00:00:00.000Z"));
    await crashes.record(report("lobby", "node-b", "2026-01-12T00:00:00.000Z"));
    await crashes.record(report("bedwars", "node-a", "2026-01-14T00:00:00.000Z"));
  });
  after(async () => fx.close());

  test("records carry nodeId and timestamp plus the node and crashedAt aliases", async () => {
    const [newest] = await crashes.list();
    assert.equal(newest.group, "bedwars");
    assert.equal(newest.nodeId, "node-a");
    assert.equal(newest.node, "node-a");
    assert.equal(newest.timestamp, "2026-01-14T00:00:00.000Z");
    assert.equal(newest.crashedAt, newest.timestamp);
    assert.deepEqual(newest.logTail, ["line 1", "line 2"]);
    assert.deepEqual(await crashes.get(newest.id), newest);
  });

  test("list is newest first and filters by group, node and from", async () => {
    const times = async (filter: Parameters<CrashService["list"]>[0]) => (await crashes.list(filter)).map((c) => c.timestamp.slice(0, 10));
    assert.deepEqual(await times({}), ["2026-01-14", "2026-01-12", "2026-01-10"]);
    assert.deepEqual(await times({ group: "lobby" }), ["2026-01-12", "2026-01-10"]);
    assert.deepEqual(await times({ node: "node-a" }), ["2026-01-14", "2026-01-10"]);
    assert.deepEqual(await times({ from: "2026-01-12T00:00:00Z" }), ["2026-01-14", "2026-01-12"], "from is inclusive");
    assert.deepEqual(await times({ from: "2026-01-12T01:00:00+02:00" }), ["2026-01-14", "2026-01-12"], "offsets are honoured");
    assert.deepEqual(await times({ from: "2026-01-11" }), ["2026-01-14", "2026-01-12"]);
    assert.deepEqual(await times({ from: "2026-01-12T01:00:00 02:00" }), ["2026-01-14", "2026-01-12"], "an unencoded + arrives as a space");
    assert.deepEqual(await times({ group: "lobby", node: "node-a" }), ["2026-01-10"]);
    assert.deepEqual(await times({ limit: 1 }), ["2026-01-14"]);
  });

  test("an invalid from is 422 naming from", async () => {
    for (const from of ["yesterday", "2026-13-01", "2026-01-01T25:00:00Z", "1700000000"]) {
      await assert.rejects(crashes.list({ from }), apiError(422, "VALIDATION_ERROR", /^from:/), from);
    }
  });

  test("an unknown id is 404", async () => {
    await assert.rejects(crashes.get("missing"), apiError(404, "NOT_FOUND", /^Crash not found: missing$/));
  });

  test("records expire 30 days after their timestamp (crashes_ttl)", async () => {
    assert.equal(crashRetentionSeconds, 2_592_000);
    fx.clock.set(at("2026-02-10T12:00:00.000Z"));
    assert.deepEqual(
      (await crashes.list()).map((c) => c.group),
      ["bedwars", "lobby"],
    );
  });
});

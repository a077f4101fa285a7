/**
 * The client-side state behind the dashboard's pages: the group list and the overview counts patched
 * from events, a fetch's answer patched with the events seen while it was in flight (replay), the
 * windowed table's range, the diagnostics bundle as a tar archive real `tar` reads, and the user and
 * role forms' checks.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FakeClock } from "../support/fake-clock.js";
import { QueryCache, REPLAY_EVENTS_MAX, type QueryState } from "../../src/dashboard/live/query-cache.js";
import { patchGroupRows, patchOverviewCounts, type GroupRow } from "../../src/dashboard/live/event-reducer.js";
import { windowRange } from "../../src/dashboard/lib/window-range.js";
import { tarArchive } from "../../src/dashboard/lib/tar.js";
import { DIAGNOSTICS_ENTRIES, diagnosticsEntries, diagnosticsTar, humanLogLine } from "../../src/dashboard/lib/diagnostics-bundle.js";
import { passwordProblem, permissionSections } from "../../src/dashboard/lib/users.js";
import { event, fakeTimers, settle } from "./fakes.js";

/** The patch as a query of mutable rows takes it. */
const patchRows = (rows: GroupRow[], batch: Parameters<typeof patchGroupRows>[1]) => patchGroupRows(rows, batch) as GroupRow[];
const row = (name: string, extra: Partial<GroupRow> = {}): GroupRow => ({ name, maintenance: false, runningInstances: 1, totalPlayers: 0, ...extra });

describe("group rows patched from events", () => {
  test("maintenance and aggregates set values, the newest event wins, a deleted group goes", () => {
    const rows = [row("a"), row("b"), row("c")];
    const out = patchGroupRows(rows, [
      event(1, "GROUP_MAINTENANCE_CHANGED", { groupName: "a", maintenance: true }),
      event(2, "GROUP_AGGREGATES_UPDATED", { groupName: "a", runningInstances: 3, totalPlayers: 7 }),
      event(3, "GROUP_AGGREGATES_UPDATED", { groupName: "b", runningInstances: 2, totalPlayers: 1 }),
      event(4, "GROUP_AGGREGATES_UPDATED", { groupName: "b", runningInstances: 4, totalPlayers: 5 }),
      event(5, "GROUP_DELETED", { groupName: "c" }),
    ]);
    assert.deepEqual(out, [row("a", { maintenance: true, runningInstances: 3, totalPlayers: 7 }), row("b", { runningInstances: 4, totalPlayers: 5 })]);
    assert.equal(rows.length, 3, "the input is not changed");
  });

  test("the same array when nothing changes; applying a batch twice changes nothing more", () => {
    const rows = [row("a", { maintenance: true })];
    assert.equal(patchGroupRows(rows, [event(1, "GROUP_MAINTENANCE_CHANGED", { groupName: "a", maintenance: true })]), rows);
    assert.equal(patchGroupRows(rows, [event(1, "NODE_STATUS", { nodeId: "n" }), event(2, "GROUP_CREATED", { groupName: "z" })]), rows);
    const batch = [event(1, "GROUP_MAINTENANCE_CHANGED", { groupName: "a", maintenance: false })];
    const once = patchGroupRows(rows, batch);
    assert.notEqual(once, rows);
    assert.equal(patchGroupRows(once, batch), once);
  });
});

describe("overview counts moved by events", () => {
  const counts = { nodeCount: 1, instanceCount: 10, playerCount: 3, groupCount: 2 };
  test("a new instance counts, one stopping or crashing leaves, a change between live states does not move", () => {
    const out = patchOverviewCounts(counts, [
      event(1, "INSTANCE_STATE_CHANGED", { newState: "SCHEDULED" }),
      event(2, "INSTANCE_STATE_CHANGED", { oldState: "STARTING", newState: "RUNNING" }),
      event(3, "INSTANCE_STATE_CHANGED", { oldState: "RUNNING", newState: "CRASHED" }),
      event(4, "INSTANCE_STATE_CHANGED", { oldState: "STOPPING", newState: "STOPPED" }),
      event(5, "GROUP_CREATED", { groupName: "x" }),
    ]);
    assert.deepEqual(out, { ...counts, instanceCount: 9, groupCount: 3 });
  });
  test("the same object when nothing moves, and never below zero", () => {
    assert.equal(patchOverviewCounts(counts, [event(1, "INSTANCE_STATE_CHANGED", { oldState: "STARTING", newState: "RUNNING" })]), counts);
    const none = { ...counts, groupCount: 0 };
    assert.equal(patchOverviewCounts(none, [event(1, "GROUP_DELETED", { groupName: "x" })]).groupCount, 0);
  });
});

describe("replay: events seen during a fetch patch its answer", () => {
  test("an answer read before a change does not take the change off the screen", async () => {
    const clock = new FakeClock();
    const cache = new QueryCache(fakeTimers(clock));
    let release: (rows: GroupRow[]) => void = () => undefined;
    const states: QueryState<GroupRow[]>[] = [];
    cache.watch("groups", { load: () => new Promise<GroupRow[]>((r) => (release = r)), patch: patchRows, replay: true }, (s) => states.push(s));
    await settle();
    // While the fetch is in flight, the group goes into maintenance.
    cache.events([event(1, "GROUP_MAINTENANCE_CHANGED", { groupName: "a", maintenance: true })]);
    release([row("a")]); // read before the change
    await settle();
    assert.equal(states.at(-1)!.data![0].maintenance, true);
  });

  test("without replay the stale answer is shown as it is (the option is what makes the difference)", async () => {
    const clock = new FakeClock();
    const cache = new QueryCache(fakeTimers(clock));
    let release: (rows: GroupRow[]) => void = () => undefined;
    const states: QueryState<GroupRow[]>[] = [];
    cache.watch("groups", { load: () => new Promise<GroupRow[]>((r) => (release = r)), patch: patchRows }, (s) => states.push(s));
    await settle();
    cache.events([event(1, "GROUP_MAINTENANCE_CHANGED", { groupName: "a", maintenance: true })]);
    release([row("a")]);
    await settle();
    assert.equal(states.at(-1)!.data![0].maintenance, false);
  });

  test("beyond the kept events the answer is fetched again instead", async () => {
    const clock = new FakeClock();
    const cache = new QueryCache(fakeTimers(clock));
    const releases: ((rows: GroupRow[]) => void)[] = [];
    const states: QueryState<GroupRow[]>[] = [];
    const load = () => new Promise<GroupRow[]>((r) => releases.push(r));
    cache.watch("groups", { load, patch: patchRows, replay: true, minIntervalMs: 1 }, (s) => states.push(s));
    await settle();
    const flood = Array.from({ length: REPLAY_EVENTS_MAX + 1 }, (_, i) => event(i + 1, "GROUP_MAINTENANCE_CHANGED", { groupName: "a", maintenance: true }));
    cache.events(flood);
    releases[0]([row("a")]);
    await settle();
    clock.advance(10);
    await settle();
    assert.equal(releases.length, 2, "fetched again");
    releases[1]([row("a", { maintenance: true })]);
    await settle();
    assert.equal(states.at(-1)!.data![0].maintenance, true);
  });
});

describe("window range", () => {
  test("renders the viewport's rows and the overscan, spacers stand for the rest", () => {
    const r = windowRange({ count: 1_000, scrolledPx: 370, viewportPx: 370, rowHeightPx: 37, overscan: 8 });
    assert.deepEqual(r, { start: 2, end: 29, topPx: 74, bottomPx: (1_000 - 29) * 37 });
    assert.equal(r.topPx + (r.end - r.start) * 37 + r.bottomPx, 1_000 * 37, "the full list's height");
  });
  test("edges: empty, the top, past the end", () => {
    assert.deepEqual(windowRange({ count: 0, scrolledPx: 0, viewportPx: 500, rowHeightPx: 30, overscan: 5 }), { start: 0, end: 0, topPx: 0, bottomPx: 0 });
    assert.equal(windowRange({ count: 10, scrolledPx: 0, viewportPx: 10_000, rowHeightPx: 30, overscan: 5 }).end, 10);
    const past = windowRange({ count: 10, scrolledPx: 1e6, viewportPx: 300, rowHeightPx: 30, overscan: 5 });
    assert.ok(past.start < past.end && past.end === 10 && past.bottomPx === 0);
  });
});

describe("the diagnostics bundle", () => {
  test("is a tar archive that tar lists and extracts, with the CLI's entries and HUMAN log lines", () => {
    const dir = mkdtempSync(join(tmpdir(), "diag-tar-"));
    try {
      const ts = Date.UTC(2026, 0, 2, 3, 4, 5, 678);
      const view = {
        generatedAt: "2026-01-02T03:04:05.000Z",
        readiness: { ready: true },
        overview: { groupCount: 2 },
        settings: {},
        config: { http: { port: 8080 } },
        kv: { keys: 3 },
        leases: [],
        logs: { records: [{ ts, level: "INFO", logger: "cloud.scheduler", thread: "main", message: "pass done" }] },
      };
      const file = join(dir, "bundle.tar");
      writeFileSync(file, diagnosticsTar(view, "http://127.0.0.1:8080/", 10, ts));
      const listed = execFileSync("tar", ["-tf", file], { encoding: "utf8" }).trim().split("\n");
      assert.deepEqual(listed, DIAGNOSTICS_ENTRIES);
      execFileSync("tar", ["-xf", file, "-C", dir]);
      const manifest = JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8"));
      assert.equal(manifest.controller, "http://127.0.0.1:8080");
      assert.equal(manifest.logRecords, 1);
      assert.deepEqual(JSON.parse(readFileSync(join(dir, "config.json"), "utf8")), view.config);
      assert.equal(readFileSync(join(dir, "logs.txt"), "utf8"), "2026-01-02 03:04:05.678 [main] INFO  scheduler - pass done\n");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  test("leaves logs.txt out when no line was asked for; a throwable follows its line", () => {
    assert.ok(!diagnosticsEntries({}, "http://c", 0, 0).some((e) => e.name === "logs.txt"));
    assert.equal(
      humanLogLine({ ts: 0, level: "ERROR", logger: "x", thread: "t", message: "m", throwable: "Error: y" }),
      "1970-01-01 00:00:00.000 [t] ERROR x - m\nError: y",
    );
  });
  test("a file larger than a block is padded, and a bad name is refused", () => {
    const content = new Uint8Array(700).fill(65);
    const tar = tarArchive([{ name: "a.bin", content, mtimeMs: 0 }]);
    assert.equal(tar.length, 512 + 1024 + 1024);
    assert.throws(() => tarArchive([{ name: "x".repeat(101), content: "", mtimeMs: 0 }]), RangeError);
    assert.throws(() => tarArchive([{ name: "é", content: "", mtimeMs: 0 }]), RangeError);
  });
});

describe("user and role forms", () => {
  test("passwords: long enough and repeated", () => {
    assert.match(passwordProblem("short", "short")!, /at least 8/);
    assert.match(passwordProblem("long-enough", "long-enougH")!, /differ/);
    assert.equal(passwordProblem("long-enough", "long-enough"), null);
  });
  test("the permission catalog in sections, in its order", () => {
    const sections = permissionSections([
      { name: "groups.view", description: "" },
      { name: "CLUSTER_VIEW", description: "" },
      { name: "groups.update", description: "" },
      { name: "CLUSTER_MANAGE", description: "" },
    ]);
    assert.deepEqual(
      sections.map(([s, list]) => [s, list.map((p) => p.name)]),
      [
        ["groups", ["groups.view", "groups.update"]],
        ["cluster", ["CLUSTER_VIEW", "CLUSTER_MANAGE"]],
      ],
    );
  });
});

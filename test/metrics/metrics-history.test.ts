// The metrics history through the real controller on the fake clock: samples every
// metrics.collectionIntervalSeconds into the document store, pruned past metrics.retentionHours,
// still there after a restart, served by GET /api/v1/metrics/history (system.view) with the
// error envelope for bad queries; 404 when metrics are disabled.
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { METRICS_HISTORY_COLLECTION } from "../../src/metrics/metrics-history.js";
import { FakeClock } from "../support/fake-clock.js";
import { startTestApp, type TestApp } from "../support/http-app.js";
import { instanceRecord } from "../scheduler/support.js";

const INTERVAL_MS = 600_000;
const startMs = Math.floor(Date.now() / INTERVAL_MS) * INTERVAL_MS;

describe("metrics history", () => {
  const clock = new FakeClock(startMs);
  let dir: string;
  let t: TestApp;
  let admin: string;
  const start = () => startTestApp({ dir, clock, config: { metrics: { collectionIntervalSeconds: INTERVAL_MS / 1000, retentionHours: 1 } } });

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "cloud-metrics-history-"));
    t = await start();
    admin = await t.tokenFor("ADMIN");
  });
  after(async () => {
    await t.close();
    await rm(dir, { recursive: true, force: true });
  });

  /** One collection interval on the fake clock, and the sample it started. */
  async function nextSample(): Promise<void> {
    clock.advance(INTERVAL_MS);
    await t.metricsHistory.sampleNow();
  }

  const history = async (query: string, token = admin) => t.request("GET", `/api/v1/metrics/history?${query}`, { token });
  const range = (fromMs: number, toMs: number) => `from=${new Date(fromMs).toISOString()}&to=${new Date(toMs).toISOString()}`;

  it("samples nodes, running instances, players per group, HTTP requests and reported TPS every interval", async () => {
    await t.nodes.upsert("node-a", { host: "10.0.0.1", state: "ONLINE" });
    await t.nodes.upsert("node-b", { host: "10.0.0.2", state: "OFFLINE" });
    await t.instances.save(instanceRecord({ id: "lobby-1", group: "lobby", node: "node-a", state: "RUNNING", playerCount: 7 }));
    await t.instances.save(instanceRecord({ id: "lobby-2", group: "lobby", node: "node-a", state: "STARTING", playerCount: 0 }));
    await t.instances.save(instanceRecord({ id: "bedwars-1", group: "bedwars", node: "node-a", state: "RUNNING", playerCount: 3 }));
    await t.instances.save(instanceRecord({ id: "bedwars-0", group: "bedwars", node: "node-a", state: "STOPPED", playerCount: 9 }));
    await nextSample(); // the requests above are counted in the first interval
    for (let i = 0; i < 4; i++) assert.equal((await t.request("GET", "/api/v1/overview", { token: admin })).status, 200);
    t.metricsHistory.reportTps("lobby-1", 19.5);
    await nextSample();

    const res = await history(
      `series=nodes,instances,players,players:lobby,players:bedwars,http.requests,http.latencyMs,tps:lobby-1&${range(startMs, clock.nowMs() + 1)}&step=600`,
    );
    assert.equal(res.status, 200, res.text);
    const series = new Map((res.json.series as { name: string; points: [number, number][] }[]).map((s) => [s.name, s.points]));
    const second = startMs + 2 * INTERVAL_MS;
    assert.deepEqual(series.get("nodes"), [
      [startMs + INTERVAL_MS, 1],
      [second, 1],
    ]);
    assert.deepEqual(series.get("instances")?.at(-1), [second, 2]);
    assert.deepEqual(series.get("players")?.at(-1), [second, 10]);
    assert.deepEqual(series.get("players:lobby")?.at(-1), [second, 7]);
    assert.deepEqual(series.get("players:bedwars")?.at(-1), [second, 3]);
    assert.deepEqual(series.get("http.requests")?.at(-1), [second, 4]);
    assert.ok((series.get("http.latencyMs")?.at(-1)?.[1] ?? 0) > 0, "the interval's mean latency");
    assert.deepEqual(series.get("tps:lobby-1"), [[second, 19.5]], "a TPS report goes into the next sample only");
    assert.equal(res.json.stepSeconds, 600);
    assert.equal(res.json.truncated, false);
  });

  it("averages the samples that fall into one step", async () => {
    const res = await history(`series=nodes,http.requests&${range(startMs, startMs + 4 * INTERVAL_MS)}&step=3600`);
    assert.equal(res.status, 200, res.text);
    const requests = res.json.series.find((s: { name: string }) => s.name === "http.requests").points as [number, number][];
    assert.equal(requests.length, 1);
    assert.equal(requests[0]![0], startMs);
    assert.ok(requests[0]![1] >= 2, "the mean of the two samples in the hour");
  });

  it("prunes what is older than metrics.retentionHours", async () => {
    for (let i = 0; i < 12; i++) await nextSample(); // two hours
    const docs = await t.documents.collection<{ _id: string; atMs: number }>(METRICS_HISTORY_COLLECTION).find();
    const oldestMs = Math.min(...docs.map((d) => d.atMs));
    assert.ok(docs.length <= 7, `at most one hour of samples kept, found ${docs.length}`);
    assert.ok(oldestMs >= clock.nowMs() - 3_600_000, "nothing older than the retention");
  });

  it("keeps its samples across a restart", async () => {
    const before = (await history(`series=nodes&${range(startMs, clock.nowMs() + 1)}`)).json.series[0].points.length;
    assert.ok(before > 0);
    await t.stop();
    t = await start();
    admin = await t.tokenFor("ADMIN");
    const res = await history(`series=nodes&${range(startMs, clock.nowMs() + 1)}`);
    assert.equal(res.status, 200);
    assert.equal(res.json.series[0].points.length, before);
    await nextSample(); // the restarted controller samples again (and prunes the oldest)
    const points = (await history(`series=nodes&${range(startMs, clock.nowMs() + 1)}`)).json.series[0].points as [number, number][];
    assert.deepEqual(points.at(-1), [clock.nowMs(), 1]);
  });

  it("is readable with system.view; bad queries get the error envelope", async () => {
    assert.equal((await history("series=nodes", await t.tokenFor("VIEWER"))).status, 200);
    assert.equal((await t.request("GET", "/api/v1/metrics/history")).status, 401);
    const now = clock.nowMs();
    for (const [query, field] of [
      [range(now, now - 1000), "from"],
      ["from=yesterday", "from"],
      ["to=not-a-time", "to"],
      [`${range(now - 3_600_000, now)}&step=60`, "step"],
      [`${range(now - 30 * 86_400_000, now)}&step=600`, "step"],
      ["series=nodes,bad%20name", "series"],
      ["series=", "series"],
      [`series=${Array.from({ length: 51 }, (_, i) => `s${i}`).join(",")}`, "series"],
      ["step=0", "step"],
    ] as const) {
      const res = await history(query);
      assert.equal(res.status, 422, `${query}: ${res.text}`);
      assert.equal(res.json.error.code, "VALIDATION_ERROR", query);
      assert.equal(res.json.error.status, 422, query);
      assert.match(res.json.error.message, new RegExp(`^${field}`), query);
    }
  });
});

describe("metrics history with metrics disabled", () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ config: { metrics: { enabled: false } } });
  });
  after(() => t.close());

  it("answers 404 and records nothing", async () => {
    const res = await t.request("GET", "/api/v1/metrics/history", { token: await t.tokenFor("ADMIN") });
    assert.equal(res.status, 404);
    assert.equal(res.json.error.code, "NOT_FOUND");
    assert.equal(await t.documents.collection(METRICS_HISTORY_COLLECTION).count(), 0);
  });
});

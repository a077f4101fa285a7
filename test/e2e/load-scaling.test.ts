// Scaling on load end to end: a real controller, a real `cloud-daemon` and simulated servers that
// report their metrics through the daemon's relay with their own workload tokens. The `load`
// console command (sent over the instance command route) makes one server's TPS drop; the DYNAMIC
// group with `loadScaling` gets one more instance, and no more than maxInstances while the mean
// stays low.
import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import {
  api,
  cleanupDirs,
  createToken,
  eventsOf,
  spawnDaemon,
  startGatewayController,
  type DaemonProcess,
  type GatewayController,
} from "../gateway/harness.js";
import { eventually } from "../support/wait.js";

const waitMs = 90_000;
/** How often the test has every RUNNING server report its metrics (`metrics` on its console). */
const reportEveryMs = 1_000;

interface Instance {
  id: string;
  state: string;
}

describe("scaling on reported load with real simulated servers", { timeout: 300_000 }, () => {
  const controllers: GatewayController[] = [];
  const daemons: DaemonProcess[] = [];
  let reporting: ReturnType<typeof setInterval> | null = null;
  after(async () => {
    if (reporting) clearInterval(reporting);
    for (const d of daemons) await d.stop();
    for (const c of controllers) await c.stop();
    cleanupDirs();
  });

  it("a lagging server makes the group one instance larger, never above maxInstances", async () => {
    const c = await startGatewayController({ scheduler: { evaluationIntervalMs: 1_000 } });
    controllers.push(c);
    const daemon = spawnDaemon([c.grpcAddress], (await createToken(c)).token, { maxMemoryMb: 2048 });
    daemons.push(daemon);
    await eventually(
      () => eventsOf(c, "NODE_CONNECTED")[0],
      () => `daemon connected\n${daemon.output()}`,
      waitMs,
    );
    const created = await api(c, "POST", "/api/v1/groups", {
      name: "arena",
      platform: "simulated",
      scalingMode: "DYNAMIC",
      minInstances: 1,
      maxInstances: 2,
      maxPlayers: 20,
      memoryMb: 64,
      portRange: { start: 28600, end: 28620 },
      loadScaling: { minTps: 19, sustainSeconds: 3, cooldownSeconds: 0 },
    });
    assert.equal(created.status, 201, JSON.stringify(created.json));
    assert.deepEqual(created.json.loadScaling, { minTps: 19, sustainSeconds: 3, cooldownSeconds: 0 });

    let lastSeen: unknown = null;
    const instances = async () => (lastSeen = (await api(c, "GET", "/api/v1/services?group=arena")).json as Instance[]);
    const running = async () => (await instances()).filter((i) => i.state === "RUNNING");
    const [first] = await eventually(
      async () => {
        const up = await running();
        return up.length === 1 ? up : null;
      },
      () => `one RUNNING instance: ${JSON.stringify(lastSeen)}\n${daemon.output().slice(-2_000)}`,
      waitMs,
    );
    const command = async (id: string, text: string) => {
      const res = await api(c, "POST", `/api/v1/services/${id}/command`, { command: text });
      assert.equal(res.status, 200, `${text} on ${id}: ${JSON.stringify(res.json)}`);
    };

    // Healthy servers at 20 TPS: reports for several evaluations change nothing.
    const report = async () => {
      for (const instance of await running()) await command(instance.id, "metrics").catch(() => undefined);
    };
    reporting = setInterval(() => void report(), reportEveryMs);
    await eventually(async () => (await api(c, "GET", "/api/v1/groups/arena/metrics")).json.reportingInstances === 1, "the first report", waitMs);
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    assert.deepEqual(
      (await instances()).map((i) => i.id),
      [first.id],
      "20 TPS: no scale-up",
    );

    // 1,000 % load: a tick takes 502 ms, the 1-minute TPS falls from 20 towards 2.
    await command(first.id, "load 1000");
    const grown = await eventually(
      async () => {
        const up = await running();
        return up.length === 2 ? up : null;
      },
      () => `a second RUNNING instance\n${c.logs().slice(-3_000)}`,
      waitMs,
    );
    const second = grown.find((i) => i.id !== first.id)!;
    assert.match(c.logs(), /Group arena: mean TPS [\d.]+ below 19 \(1 reporting\) for \d+ s: one more instance/);
    const lagging = (await api(c, "GET", `/api/v1/services/${first.id}/metrics`)).json;
    assert.ok(lagging.tps1m < 19, `the loaded server reports ${lagging.tps1m} TPS`);

    // Both report now; the loaded one keeps falling, so the mean stays below 19 — but the group is
    // at maxInstances: evaluation after evaluation, nothing more is scheduled.
    await eventually(async () => (await api(c, "GET", "/api/v1/groups/arena/metrics")).json.reportingInstances === 2, "both report", waitMs);
    await new Promise((resolve) => setTimeout(resolve, 8_000));
    const metrics = (await api(c, "GET", "/api/v1/groups/arena/metrics")).json;
    assert.ok(metrics.tps1mAvg < 19, `mean ${metrics.tps1mAvg} still below the threshold`);
    assert.deepEqual(new Set((await instances()).map((i) => i.id)), new Set([first.id, second.id]), "two instances ever, both kept");
    assert.equal((await running()).length, 2);
  });
});

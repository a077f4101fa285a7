// Heartbeat bookkeeping of one session, without timers: ping sequence, the stale bound (reported
// once per episode), resuming on any answer, and the disconnect bound.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { HeartbeatMonitor } from "../../src/gateway/heartbeat-monitor.js";

describe("gateway: heartbeat monitor", () => {
  it("pings with increasing sequences while the daemon answers, never stale", () => {
    const monitor = new HeartbeatMonitor({ staleAfterMissedPongs: 2, disconnectAfterMissedPongs: 4 }, 1_000);
    for (let i = 1; i <= 10; i++) {
      const tick = monitor.tick();
      assert.deepEqual(tick, { kind: "ping", sequence: i, becameStale: null });
      assert.equal(monitor.missedPongs, 1);
      assert.equal(monitor.answered(1_000 + i), false);
      assert.equal(monitor.missedPongs, 0);
    }
    assert.equal(monitor.stale, false);
    assert.equal(monitor.lastHeartbeatAtMs, 1_010);
  });

  it("becomes stale once at the bound, resumes on an answer, and a new episode is reported again", () => {
    const monitor = new HeartbeatMonitor({ staleAfterMissedPongs: 2, disconnectAfterMissedPongs: 10 }, 5_000);
    assert.equal(monitor.tick().kind, "ping");
    assert.equal(monitor.tick().kind, "ping");
    const third = monitor.tick();
    assert.deepEqual(third, { kind: "ping", sequence: 3, becameStale: { missedPongs: 2, lastHeartbeatAtMs: 5_000 } });
    assert.equal(monitor.stale, true);
    const fourth = monitor.tick();
    assert.equal(fourth.kind === "ping" && fourth.becameStale, null, "stale is reported once per episode");
    assert.equal(monitor.missedPongs, 4);

    assert.equal(monitor.answered(6_000), true, "the first answer ends the episode");
    assert.equal(monitor.stale, false);
    assert.equal(monitor.lastHeartbeatAtMs, 6_000);
    assert.equal(monitor.answered(6_100), false);

    monitor.tick();
    monitor.tick();
    const again = monitor.tick();
    assert.deepEqual(again, { kind: "ping", sequence: 7, becameStale: { missedPongs: 2, lastHeartbeatAtMs: 6_100 } });
  });

  it("asks for a disconnect once disconnectAfterMissedPongs pings went unanswered, without pinging", () => {
    const monitor = new HeartbeatMonitor({ staleAfterMissedPongs: 2, disconnectAfterMissedPongs: 3 }, 0);
    const kinds = [monitor.tick(), monitor.tick(), monitor.tick()].map((t) => t.kind);
    assert.deepEqual(kinds, ["ping", "ping", "ping"]);
    assert.deepEqual(monitor.tick(), { kind: "disconnect", missedPongs: 3 });
    assert.deepEqual(monitor.tick(), { kind: "disconnect", missedPongs: 3 }, "no ping counted after the bound");
  });
});

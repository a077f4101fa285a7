// Global and group maintenance end to end: a real controller, a real `cloud-daemon`, a simulated
// proxy and a simulated server built on the plugin SDK. The proxy hears MAINTENANCE_UPDATED on its
// event stream, asks the controller before letting each player in, refuses bob with the
// operator's message and admits alice (on the allowed list); a lobby in group maintenance refuses a
// transfer onto it; once both are off, bob joins and is transferred.
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

const waitMs = 60_000;

describe("maintenance through a simulated proxy", { timeout: 240_000 }, () => {
  const controllers: GatewayController[] = [];
  const daemons: DaemonProcess[] = [];
  after(async () => {
    for (const d of daemons) await d.stop();
    for (const c of controllers) await c.stop();
    cleanupDirs();
  });

  it("the proxy admits only allowed players while maintenance is on; a lobby in maintenance takes no transfer", async () => {
    const controller = await startGatewayController({ scheduler: { evaluationIntervalMs: 1_000 } });
    controllers.push(controller);
    const daemon = spawnDaemon([controller.grpcAddress], (await createToken(controller)).token, { maxMemoryMb: 2048 });
    daemons.push(daemon);
    await eventually(
      () => eventsOf(controller, "NODE_CONNECTED")[0],
      () => `daemon connected\n${daemon.output()}`,
      waitMs,
    );
    for (const g of [
      { name: "mproxy", platform: "simulated-proxy", ports: 29300 },
      { name: "mlobby", platform: "simulated", ports: 29320 },
    ]) {
      const created = await api(controller, "POST", "/api/v1/groups", {
        name: g.name,
        platform: g.platform,
        scalingMode: "STATIC",
        minInstances: 1,
        maxInstances: 1,
        memoryMb: 64,
        portRange: { start: g.ports, end: g.ports + 15 },
      });
      assert.equal(created.status, 201, JSON.stringify(created.json));
    }
    const running = await eventually(
      async () => {
        const list = (await api(controller, "GET", "/api/v1/services")).json as { id: string; group: string; state: string }[];
        const up = list.filter((r) => r.state === "RUNNING");
        return up.length === 2 ? up : null;
      },
      () => `two RUNNING instances\n${daemon.output().slice(-2000)}`,
      waitMs,
    );
    const proxy = running.find((r) => r.group === "mproxy")!.id;
    const lobby = running.find((r) => r.group === "mlobby")!.id;
    const consoleOf = (id: string) =>
      eventsOf(controller, "INSTANCE_CONSOLE_OUTPUT")
        .filter((e) => e.data.instanceId === id)
        .map((e) => String(e.data.line));
    const command = async (id: string, line: string) => {
      const res = await api(controller, "POST", `/api/v1/services/${id}/command`, { command: line });
      assert.ok(res.status < 300, `${id} ${line}: ${JSON.stringify(res.json)}`);
    };
    const lineOn = (id: string, pattern: RegExp, after = 0) =>
      eventually(
        () =>
          consoleOf(id)
            .slice(after)
            .find((line) => pattern.test(line)),
        () => `${id}: a line matching ${pattern} (got: ${consoleOf(id).slice(-15).join(" | ")})`,
        waitMs,
      );
    for (const id of [proxy, lobby]) await lineOn(id, /Connected to the event stream/);

    const on = await api(controller, "PATCH", "/api/v1/maintenance", { enabled: true, message: "Back at 22:00", allowedPlayers: ["alice"] });
    assert.equal(on.status, 200, JSON.stringify(on.json));
    await lineOn(proxy, /Maintenance is now on: Back at 22:00/);
    await command(proxy, "players join bob");
    await lineOn(proxy, /bob was refused: Back at 22:00/);
    await command(proxy, "players join alice");
    await lineOn(proxy, /alice\[\/127\.0\.0\.1\] logged in/);
    const online = await eventually(
      async () => {
        const players = (await api(controller, "GET", "/api/v1/overview")).json.playerCount as number;
        return players === 1 ? players : null;
      },
      "one player online",
      waitMs,
    );
    assert.equal(online, 1, "bob never reached the registry");
    assert.equal(eventsOf(controller, "PLAYER_CONNECTED").filter((e) => e.data.name === "bob").length, 0, "no PLAYER_CONNECTED for the refused player");

    // The lobby in maintenance: a transfer onto it is refused; alice stays on the proxy.
    const groupOn = await api(controller, "PATCH", "/api/v1/groups/mlobby", { maintenance: true });
    assert.equal(groupOn.status, 200, JSON.stringify(groupOn.json));
    await lineOn(lobby, /group in maintenance/);
    let mark = consoleOf(proxy).length;
    await command(proxy, `players send alice ${lobby}`);
    await lineOn(proxy, /Transfer of alice failed: GROUP_MAINTENANCE: /, mark);

    assert.equal((await api(controller, "PATCH", "/api/v1/groups/mlobby", { maintenance: false })).status, 200);
    assert.equal((await api(controller, "PATCH", "/api/v1/maintenance", { enabled: false })).status, 200);
    await lineOn(proxy, /Maintenance is now off/);
    mark = consoleOf(proxy).length;
    await command(proxy, "players join bob");
    await lineOn(proxy, /bob\[\/127\.0\.0\.1\] logged in/, mark);
    await command(proxy, "players transfer bob mlobby");
    await lineOn(proxy, new RegExp(`Transfer \\S+ of bob to ${lobby} completed`), mark);
    await lineOn(lobby, new RegExp(`bob\\[/127\\.0\\.0\\.1\\] logged in .* through ${proxy}`));
    assert.deepEqual(
      eventsOf(controller, "MAINTENANCE_UPDATED").map((e) => e.data.globalEnabled),
      [true, false],
    );
  });
});

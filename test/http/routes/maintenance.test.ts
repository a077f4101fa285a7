/**
 * Global maintenance on a real controller: the operator routes (validation, roles, audit,
 * MAINTENANCE_UPDATED once), the plugin's view, player admission (403 MAINTENANCE for players
 * entering the network, the allowed list, players already on it, rejoin reports), group
 * maintenance refusing joins onto its instances (403 GROUP_MAINTENANCE) and transfers onto them
 * (409), the plugin stream's maintenance events, and the SDK's admitPlayer and MaintenanceState.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { connectToCloud } from "../../../src/sdk/index.js";
import type { CloudEvent } from "../../../src/events/types.js";
import { startTestApp, type TestApp, type TestResponse } from "../../support/http-app.js";
import { frameJson, isMessage, openSse, type SseStream } from "../../support/sse-client.js";
import { eventually } from "../../support/wait.js";

const uuid = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, "0")}`;

describe("global maintenance", () => {
  let t: TestApp;
  const tokens: Record<string, string> = {};
  const streams: SseStream[] = [];
  const seen: CloudEvent[] = [];
  let sequence = 1;
  const call = (instance: string, method: string, path: string, body?: unknown): Promise<TestResponse> =>
    t.request(method, path, { token: tokens[instance], body, headers: method === "POST" ? { "x-cloud-sequence": String(++sequence) } : {} });
  const patch = async (body: unknown, role = "OPERATOR") => t.request("PATCH", "/api/v1/maintenance", { token: await t.tokenFor(role), body });

  before(async () => {
    t = await startTestApp({ config: { rateLimit: { perIpPerMinute: 1_000_000, perUserPerMinute: 1_000_000 } } });
    t.events.subscribeAll((event) => void seen.push(event));
    await t.groups.create({ name: "proxy", platform: "velocity" });
    await t.groups.create({ name: "lobby", platform: "paper" });
    await t.groups.create({ name: "arena", platform: "paper" });
    await t.nodes.upsert("n1", { host: "10.0.0.1" });
    for (const [id, group, port] of [
      ["proxy-1", "proxy", 25565],
      ["lobby-1", "lobby", 30000],
      ["arena-1", "arena", 30001],
    ] as const) {
      await t.instances.save({ id, group, node: "n1", port, memoryMb: 512, state: "RUNNING", playerCount: 0, startedAt: null, deploymentRevision: 1 });
      tokens[id] = t.credentials.issueWorkloadToken({ instanceId: id, group, node: "n1" }).token;
    }
  });
  after(async () => {
    for (const stream of streams) stream.close();
    await t.close();
  });

  it("starts off; a VIEWER reads it, only maintenance.manage changes it; bad bodies change nothing", async () => {
    const initial = await t.request("GET", "/api/v1/maintenance", { token: await t.tokenFor("VIEWER") });
    assert.equal(initial.status, 200, initial.text);
    assert.deepEqual(
      { enabled: initial.json.enabled, message: initial.json.message, allowedPlayers: initial.json.allowedPlayers },
      { enabled: false, message: null, allowedPlayers: [] },
    );
    assert.equal(initial.json.bypassPermission, "maintenance.bypass");
    assert.equal((await patch({ enabled: true }, "VIEWER")).status, 403);
    for (const bad of [{ enabled: "yes" }, { allowedPlayers: ["not a name!"] }, { extra: 1 }, { message: "x".repeat(513) }]) {
      const res = await patch(bad);
      assert.equal(res.status, 422, `${JSON.stringify(bad)}: ${res.text}`);
      assert.equal(res.json.error.code, "VALIDATION_ERROR");
    }
    assert.equal((await t.capabilities.maintenance.get()).enabled, false, "nothing changed");
  });

  it("admits only allowed players onto the network while on, and says so to plugins", async () => {
    const stream = await pluginStream("proxy-1");
    // alice is on the network before maintenance starts.
    assert.equal((await call("proxy-1", "POST", "/api/plugin/player-join", { uuid: uuid(1), name: "alice" })).status, 200);
    const before = seen.length;
    const on = await patch({ enabled: true, message: "Back at 22:00", allowedPlayers: ["Carol", uuid(4)] });
    assert.equal(on.status, 200, on.text);
    assert.deepEqual(on.json.allowedPlayers, ["00000000-0000-4000-8000-000000000004", "carol"], "lower-cased and sorted");
    assert.equal(on.json.updatedBy, "operator-user");
    await t.events.flush();
    const updates = seen.slice(before).filter((e) => e.type === "MAINTENANCE_UPDATED");
    assert.deepEqual(
      updates.map((e) => e.data),
      [{ globalEnabled: true, message: "Back at 22:00" }],
      "published once",
    );
    const [frame] = await stream.waitFor(1, (f) => isMessage(f) && frameJson(f).type === "MAINTENANCE_UPDATED");
    assert.deepEqual(frameJson(frame).data, { globalEnabled: true, message: "Back at 22:00" });

    const audit = (await t.audit.keyset({ cursor: "", pageSize: 5 })).data.find((entry) => entry.action === "maintenance.update");
    assert.ok(audit, "maintenance.update audited");
    assert.equal(JSON.parse(audit.before!).enabled, false);
    assert.equal(JSON.parse(audit.after!).enabled, true);

    const view = await call("lobby-1", "GET", "/api/plugin/maintenance");
    assert.deepEqual(view.json, { globalEnabled: true, message: "Back at 22:00", groupMaintenance: false });

    const bob = await call("proxy-1", "POST", "/api/plugin/player-join", { uuid: uuid(2), name: "bob" });
    assert.equal(bob.status, 403, bob.text);
    assert.deepEqual(bob.json.error, { code: "MAINTENANCE", message: "Back at 22:00", status: 403 });
    assert.equal(await t.players.get(uuid(2)), null, "bob was not registered");
    assert.equal((await call("proxy-1", "POST", "/api/plugin/player-join", { uuid: uuid(3), name: "carol" })).status, 200, "allowed by name");
    assert.equal((await call("proxy-1", "POST", "/api/plugin/player-join", { uuid: uuid(4), name: "dave" })).status, 200, "allowed by UUID");
    assert.equal((await call("lobby-1", "POST", "/api/plugin/player-join", { uuid: uuid(1), name: "alice" })).status, 200, "alice is on the network already");
    const rejoin = await call("lobby-1", "POST", "/api/plugin/player-join", { uuid: uuid(5), name: "erin", rejoin: true });
    assert.equal(rejoin.status, 200, "a rejoin report is never refused");

    // The SDK: admitPlayer gives the refusal as a result; MaintenanceState loads the view.
    const sdk = connectToCloud({ env: {}, controllerUrl: t.baseUrl, token: tokens["proxy-1"], instanceId: "proxy-1", group: "proxy", kind: "proxy" });
    try {
      for (let i = 0; i < sequence + 10; i++) sdk.transport.nextSequence();
      assert.deepEqual(await sdk.client.admitPlayer(uuid(6), "frank"), { admitted: false, code: "MAINTENANCE", message: "Back at 22:00" });
      assert.deepEqual(await sdk.client.admitPlayer(uuid(7), "carol"), { admitted: true });
      const state = await sdk.maintenance.refresh();
      assert.deepEqual(state, { globalEnabled: true, message: "Back at 22:00", groupMaintenance: false });
    } finally {
      await sdk.close();
    }

    assert.equal((await patch({ enabled: false })).status, 200);
    const [off] = await stream.waitFor(1, (f) => isMessage(f) && frameJson(f).type === "MAINTENANCE_UPDATED" && frameJson(f).data.globalEnabled === false);
    assert.ok(off);
    await t.events.flush();
    assert.equal(seen.filter((e) => e.type === "MAINTENANCE_UPDATED").length, 2, "one event per change");
    assert.equal((await call("proxy-1", "POST", "/api/plugin/player-join", { uuid: uuid(2), name: "bob" })).status, 200, "bob joins once it is off");
  });

  it("a group in maintenance refuses joins and transfers onto its instances", async () => {
    assert.equal((await call("proxy-1", "POST", "/api/plugin/player-join", { uuid: uuid(10), name: "gina" })).status, 200);
    assert.equal((await call("lobby-1", "POST", "/api/plugin/player-join", { uuid: uuid(10), name: "gina" })).status, 200);
    const res = await t.request("PATCH", "/api/v1/groups/arena", { token: await t.tokenFor("OPERATOR"), body: { maintenance: true } });
    assert.equal(res.status, 200, res.text);
    const join = await call("arena-1", "POST", "/api/plugin/player-join", { uuid: uuid(10), name: "gina" });
    assert.equal(join.status, 403, join.text);
    assert.equal(join.json.error.code, "GROUP_MAINTENANCE");
    assert.equal((await t.players.get(uuid(10)))?.instanceId, "lobby-1", "gina stays on the lobby");
    const transfer = await call("proxy-1", "POST", "/api/plugin/transfer", { playerUuid: uuid(10), targetInstanceId: "arena-1" });
    assert.equal(transfer.status, 409, transfer.text);
    assert.equal(transfer.json.error.code, "GROUP_MAINTENANCE");
    assert.equal((await call("arena-1", "GET", "/api/plugin/maintenance")).json.groupMaintenance, true);
    // A player on the allowed list comes in all the same.
    assert.equal((await patch({ allowedPlayers: ["gina"] })).status, 200);
    assert.equal((await call("arena-1", "POST", "/api/plugin/player-join", { uuid: uuid(10), name: "gina" })).status, 200);
    await eventually(async () => (await t.players.get(uuid(10)))?.instanceId === "arena-1", "gina on the arena");
  });

  async function pluginStream(instance: string): Promise<SseStream> {
    const ticket = await call(instance, "POST", "/api/plugin/events/ticket");
    assert.equal(ticket.status, 200, ticket.text);
    const stream = await openSse(`${t.baseUrl}/api/v1/events/stream?ticket=${ticket.json.ticket}`);
    streams.push(stream);
    await stream.waitFor(1);
    return stream;
  }
});

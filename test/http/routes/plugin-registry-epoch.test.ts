/**
 * The player registry's epoch (`cloud:v1:players:epoch`): created once and kept, a new one when the
 * store lost it; the plugin event stream's connected frame names it (the general stream's does
 * not), and an open plugin stream hears `event: registry-epoch` when the controller's periodic
 * check finds it changed. Real HTTP on the controller the composition root builds, fake clock.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { PLAYER_REGISTRY_EPOCH_KEY, registryEpochCheckIntervalMs, rosterKey } from "../../../src/plugin-api/players.js";
import { FakeClock } from "../../support/fake-clock.js";
import { startTestApp, type TestApp } from "../../support/http-app.js";
import { frameJson, openSse, type SseStream } from "../../support/sse-client.js";
import { eventually } from "../../support/wait.js";
import { instanceRecord } from "../../scheduler/support.js";

const WAIT_MS = 10_000;
const alice = "00000000-0000-4000-8000-000000000001";

describe("plugin API: the player registry's epoch", () => {
  let t: TestApp;
  let token: string;
  let sequence = 0;
  const clock = new FakeClock(Date.parse("2026-03-01T12:00:00Z"));
  const streams: SseStream[] = [];

  const post = (path: string, body?: unknown) => t.request("POST", path, { token, body, headers: { "x-cloud-sequence": String(++sequence) } });
  const pluginStream = async (): Promise<{ stream: SseStream; connected: Record<string, unknown> }> => {
    const ticket = await post("/api/plugin/events/ticket");
    assert.equal(ticket.status, 200, ticket.text);
    const stream = await openSse(`${t.baseUrl}/api/v1/events/stream?ticket=${ticket.json.ticket}`);
    streams.push(stream);
    const [connected] = await stream.waitFor(1);
    assert.equal(connected.event, "connected");
    return { stream, connected: frameJson(connected) };
  };

  before(async () => {
    t = await startTestApp({ clock });
    await t.groups.create({ name: "lobby", platform: "paper" });
    await t.nodes.upsert("n1", { host: "10.0.0.1" });
    await t.instances.save(instanceRecord({ id: "lobby-1", group: "lobby", node: "n1", state: "RUNNING", deploymentRevision: 1 }));
    token = t.credentials.issueWorkloadToken({ instanceId: "lobby-1", group: "lobby", node: "n1" }).token;
  });
  after(async () => {
    for (const stream of streams) stream.close();
    await t.close();
  });

  it("exists from the start, is kept, and the plugin stream's connected frame names it (the general stream's does not)", async () => {
    const stored = await t.kv.get(PLAYER_REGISTRY_EPOCH_KEY);
    assert.ok(stored && stored.length >= 16, `an epoch was written at start: ${stored}`);
    assert.equal(await t.players.epoch(), stored);
    assert.equal(await t.players.epoch(), stored, "reading it again changes nothing");
    assert.equal(await t.kv.ttlMs(PLAYER_REGISTRY_EPOCH_KEY), null, "no expiry");

    const { connected } = await pluginStream();
    assert.equal(connected.message, "Connected to the plugin event stream");
    assert.equal(connected.registryEpoch, stored);
    assert.equal(typeof connected.latestSequence, "number");

    const viewer = await t.tokenFor("VIEWER");
    const ticket = await t.request("POST", "/api/v1/events/ticket", { token: viewer });
    const general = await openSse(`${t.baseUrl}/api/v1/events/stream?ticket=${ticket.json.ticket}`);
    streams.push(general);
    const [generalConnected] = await general.waitFor(1);
    assert.deepEqual(Object.keys(frameJson(generalConnected)).sort(), ["latestSequence", "message"], "the general stream's fields are the spec's");
  });

  it("a store that lost the registry gets a new epoch: the next stream names it, and an open one is told within one check", async () => {
    const before = await t.players.epoch();
    const join = await post("/api/plugin/player-join", { uuid: alice, name: "alice" });
    assert.equal(join.status, 200, join.text);
    const { stream: open } = await pluginStream();

    // The store loses its data (a flushed Redis): the registry and its epoch are gone.
    await t.kv.delete(`cloud:v1:player:${alice}`);
    await t.kv.delete(rosterKey("lobby-1"));
    await t.kv.delete(PLAYER_REGISTRY_EPOCH_KEY);
    assert.equal((await t.request("GET", "/api/plugin/players", { token })).json.length, 0);

    const { connected } = await pluginStream();
    const after = connected.registryEpoch as string;
    assert.equal(typeof after, "string");
    assert.notEqual(after, before, "a new epoch");
    assert.equal(await t.kv.get(PLAYER_REGISTRY_EPOCH_KEY), after, "written back");
    // The stream that connected before the loss hears of it (the read above already noticed; so would the periodic check).
    const told = await eventually(() => open.frames.find((f) => f.event === "registry-epoch"), "registry-epoch frame on the open stream", WAIT_MS);
    assert.deepEqual(frameJson(told), { registryEpoch: after });

    // The plugin reports its player again: the registry has it back.
    const again = await post("/api/plugin/player-join", { uuid: alice, name: "alice" });
    assert.equal(again.status, 200, again.text);
    assert.equal(again.json.playerCount, 1);
    const listed = (await t.request("GET", "/api/plugin/players", { token })).json as { uuid: string; instanceId: string }[];
    assert.deepEqual(
      listed.map((p) => [p.uuid, p.instanceId]),
      [[alice, "lobby-1"]],
    );
  });

  it("the periodic check notices a lost epoch with no stream connecting, and tells the open streams once", async () => {
    const { stream } = await pluginStream();
    const before = await t.players.epoch();
    await t.kv.delete(PLAYER_REGISTRY_EPOCH_KEY);
    await clock.advanceAsync(registryEpochCheckIntervalMs);
    const told = await eventually(() => stream.frames.find((f) => f.event === "registry-epoch"), "registry-epoch frame after one check", WAIT_MS);
    const after = frameJson(told).registryEpoch as string;
    assert.notEqual(after, before);
    assert.equal(await t.kv.get(PLAYER_REGISTRY_EPOCH_KEY), after);
    await clock.advanceAsync(registryEpochCheckIntervalMs * 2);
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(stream.frames.filter((f) => f.event === "registry-epoch").length, 1, "an unchanged epoch is not announced again");
  });
});

/**
 * The plugin API through real HTTP calls on the controller the composition root builds: every
 * route of spec document 3's plugin table and its errors, the plugin event stream (transfers and
 * player events), the sequence header, token rotation and revocation, and the metrics reads.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { FakeClock } from "../../support/fake-clock.js";
import { startTestApp, type TestApp, type TestResponse } from "../../support/http-app.js";
import { frameJson, isMessage, openSse, type SseStream } from "../../support/sse-client.js";
import { eventually } from "../../support/wait.js";
import type { InstanceState } from "../../../src/domain/instances/instance-schemas.js";

const uuid = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, "0")}`;
const WAIT_MS = 10_000;

async function seedNetwork(t: TestApp): Promise<Record<string, string>> {
  await t.groups.create({ name: "proxy", platform: "velocity" });
  await t.groups.create({ name: "lobby", platform: "paper" });
  await t.groups.create({ name: "arena", platform: "paper" });
  await t.groups.create({ name: "empty", platform: "paper" });
  await t.nodes.upsert("n1", { host: "10.0.0.1" });
  const tokens: Record<string, string> = {};
  const add = async (id: string, group: string, state: InstanceState, port: number) => {
    await t.instances.save({ id, group, node: "n1", port, memoryMb: 512, state, playerCount: 0, startedAt: null, deploymentRevision: 1 });
    tokens[id] = t.credentials.issueWorkloadToken({ instanceId: id, group, node: "n1" }).token;
  };
  await add("proxy-1", "proxy", "RUNNING", 25565);
  await add("lobby-1", "lobby", "RUNNING", 30000);
  await add("arena-1", "arena", "RUNNING", 30001);
  await add("arena-2", "arena", "RUNNING", 30002);
  await add("arena-3", "arena", "STARTING", 30003);
  await add("empty-1", "empty", "STARTING", 30004);
  return tokens;
}

describe("plugin API", () => {
  let t: TestApp;
  let tokens: Record<string, string>;
  const streams: SseStream[] = [];
  let sequence = 1000;

  /** A plugin call with the instance's token and a fresh sequence number. */
  const call = (instance: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<TestResponse> =>
    t.request(method, path, { token: tokens[instance], body, headers: method === "POST" ? { "x-cloud-sequence": String(++sequence), ...headers } : headers });

  const expectError = (res: TestResponse, status: number, code: string) => {
    assert.equal(res.status, status, res.text);
    assert.deepEqual(Object.keys(res.json), ["error"], res.text);
    assert.equal(res.json.error.code, code, res.text);
    assert.equal(res.json.error.status, status, res.text);
  };

  /** Opens the plugin event stream of an instance. */
  const pluginStream = async (instance: string): Promise<SseStream> => {
    const ticket = await call(instance, "POST", "/api/plugin/events/ticket");
    assert.equal(ticket.status, 200, ticket.text);
    const stream = await openSse(`${t.baseUrl}/api/v1/events/stream?ticket=${ticket.json.ticket}`);
    streams.push(stream);
    const [connected] = await stream.waitFor(1);
    assert.equal(connected.event, "connected");
    assert.equal(frameJson(connected).message, "Connected to the plugin event stream");
    return stream;
  };
  const framesOf = (stream: SseStream, event: string): any[] => stream.frames.filter((f) => f.event === event).map(frameJson);
  const messagesOf = (stream: SseStream, type: string): any[] =>
    stream.frames
      .filter(isMessage)
      .map(frameJson)
      .filter((e) => e.type === type);

  before(async () => {
    t = await startTestApp({ config: { rateLimit: { perIpPerMinute: 1_000_000, perUserPerMinute: 1_000_000 } } });
    tokens = await seedNetwork(t);
  });
  after(async () => {
    for (const stream of streams) stream.close();
    await t.close();
  });

  it("records players across the network: proxy and server joins, the players and instances lists, counts and aggregates", async () => {
    assert.equal((await call("proxy-1", "POST", "/api/plugin/player-join", { uuid: uuid(1), name: "alice" })).json.playerCount, 1);
    const onLobby = await call("lobby-1", "POST", "/api/plugin/player-join", { uuid: uuid(1), name: "alice", group: "lobby" });
    assert.deepEqual(onLobby.json, { instanceId: "lobby-1", playerCount: 1 });
    await call("arena-1", "POST", "/api/plugin/player-join", { uuid: uuid(2), name: "bob" });

    const players = (await call("lobby-1", "GET", "/api/plugin/players")).json;
    assert.equal(players.length, 2);
    const alice = players.find((p: any) => p.uuid === uuid(1));
    assert.equal(alice.instanceId, "lobby-1");
    assert.equal(alice.group, "lobby");
    assert.equal(alice.proxyInstanceId, "proxy-1");
    assert.match(alice.connectedAt, /^\d{4}-\d\d-\d\dT/);
    const bob = players.find((p: any) => p.uuid === uuid(2));
    assert.equal(bob.proxyInstanceId, null, "bob joined a server directly");

    const instances = (await call("lobby-1", "GET", "/api/plugin/instances")).json.map((i: any) => i.id).sort();
    assert.deepEqual(instances, ["arena-1", "arena-2", "arena-3", "empty-1", "lobby-1"], "proxies are not backend instances");
    assert.equal((await t.instances.get("lobby-1")).playerCount, 1);
    assert.equal((await t.instances.get("proxy-1")).playerCount, 1);

    const groups = (await call("lobby-1", "GET", "/api/plugin/groups")).json;
    assert.equal(groups.find((g: any) => g.name === "arena").totalPlayers, 1);
    const overview = await t.request("GET", "/api/v1/overview", { token: await t.tokenFor("VIEWER") });
    assert.equal(overview.json.playerCount, 2, "distinct players, not proxy plus server");
    const scrape = await t.request("GET", "/metrics");
    assert.match(scrape.text, /^cloud_players_total 2$/m);
  });

  it("refuses malformed players and unknown leaves with the envelope", async () => {
    expectError(await call("lobby-1", "POST", "/api/plugin/player-join", { uuid: "nope", name: "x" }), 422, "VALIDATION_ERROR");
    expectError(await call("lobby-1", "POST", "/api/plugin/player-join", { uuid: uuid(9), name: "x", group: "arena" }), 400, "BAD_REQUEST");
    expectError(await call("lobby-1", "POST", "/api/plugin/player-leave", { uuid: uuid(9) }), 404, "NOT_FOUND");
    expectError(await t.request("GET", "/api/plugin/players"), 401, "UNAUTHORIZED");
    expectError(await t.request("GET", "/api/plugin/players", { token: await t.tokenFor("ADMIN") }), 401, "UNAUTHORIZED");
  });

  it("transfers: 400, 404, 409, then queued to the proxy's stream and completed when the player arrives", async () => {
    const proxyStream = await pluginStream("proxy-1");
    expectError(await call("lobby-1", "POST", "/api/plugin/transfer", { playerUuid: "not-a-uuid", targetInstanceId: "arena-2" }), 400, "BAD_REQUEST");
    expectError(await call("lobby-1", "POST", "/api/plugin/transfer", { playerUuid: uuid(1) }), 400, "BAD_REQUEST");
    expectError(await call("lobby-1", "POST", "/api/plugin/transfer", { playerUuid: uuid(77), targetInstanceId: "arena-2" }), 404, "NOT_FOUND");
    expectError(await call("lobby-1", "POST", "/api/plugin/transfer", { playerUuid: uuid(1), targetInstanceId: "nowhere-1" }), 404, "NOT_FOUND");
    expectError(await call("lobby-1", "POST", "/api/plugin/transfer", { playerUuid: uuid(1), targetInstanceId: "arena-3" }), 409, "INVALID_STATE");
    assert.equal(await t.transfers.pendingCount(), 0, "refused transfers queue nothing");

    const queued = await call("lobby-1", "POST", "/api/plugin/transfer", { playerUuid: uuid(1), targetInstanceId: "arena-2" });
    assert.equal(queued.status, 202, queued.text);
    assert.equal(queued.json.holderInstanceId, "proxy-1");
    assert.equal(queued.json.fromInstanceId, "lobby-1");
    assert.equal(queued.json.state, "PENDING");
    const [delivered] = await eventually(
      () => (framesOf(proxyStream, "transfer").length ? framesOf(proxyStream, "transfer") : null),
      "transfer on the proxy's stream",
      WAIT_MS,
    );
    assert.equal(delivered.id, queued.json.id);
    assert.equal(delivered.targetInstanceId, "arena-2");
    assert.match((await t.request("GET", "/metrics")).text, /^cloud_workflows_pending_transfers 1$/m);

    // The proxy moves the player: the target reports the join.
    await call("arena-2", "POST", "/api/plugin/player-join", { uuid: uuid(1), name: "alice" });
    await eventually(() => framesOf(proxyStream, "transfer-completed").find((f) => f.id === queued.json.id), "transfer-completed", WAIT_MS);
    const moved = await eventually(() => messagesOf(proxyStream, "PLAYER_TRANSFER")[0], "PLAYER_TRANSFER on the plugin stream", WAIT_MS);
    assert.deepEqual(moved.data, { uuid: uuid(1), name: "alice", fromInstanceId: "lobby-1", toInstanceId: "arena-2" });
    const journey = await eventually(() => messagesOf(proxyStream, "PLAYER_JOURNEY").find((e) => e.data.entry.action === "TRANSFERRED"), "journey", WAIT_MS);
    assert.equal(journey.data.entry.fromInstanceId, "lobby-1");
    assert.equal(await t.transfers.pendingCount(), 0);
    assert.equal((await t.instances.get("lobby-1")).playerCount, 0);
    assert.equal((await t.instances.get("arena-2")).playerCount, 1);
  });

  it("transfer-to-group: 404 for a missing group, 409 with nothing running, else the least-loaded RUNNING instance", async () => {
    expectError(await call("arena-1", "POST", "/api/plugin/transfer-to-group", { playerUuid: uuid(2), group: "ghosts" }), 404, "NOT_FOUND");
    expectError(await call("arena-1", "POST", "/api/plugin/transfer-to-group", { playerUuid: uuid(2), group: "empty" }), 409, "NO_RUNNING_INSTANCES");
    expectError(await call("arena-1", "POST", "/api/plugin/transfer-to-group", { playerUuid: "x", group: "lobby" }), 400, "BAD_REQUEST");
    // bob is on arena-1; arena-2 holds alice; lobby-1 is empty.
    await call("lobby-1", "POST", "/api/plugin/player-join", { uuid: uuid(3), name: "carol" });
    const serverStream = await pluginStream("arena-1");
    const res = await call("proxy-1", "POST", "/api/plugin/transfer-to-group", { playerUuid: uuid(2), group: "arena" });
    assert.equal(res.status, 202, res.text);
    assert.equal(res.json.targetInstanceId, "arena-2", "the only other RUNNING arena instance");
    assert.equal(res.json.targetGroup, "arena");
    assert.equal(res.json.holderInstanceId, "arena-1", "bob joined arena-1 directly: it moves him");
    await eventually(() => framesOf(serverStream, "transfer").find((f) => f.id === res.json.id), "transfer on arena-1's stream", WAIT_MS);
    const toLobby = await call("proxy-1", "POST", "/api/plugin/transfer-to-group", { playerUuid: uuid(2), group: "lobby" });
    assert.equal(toLobby.json.targetInstanceId, "lobby-1");
    // The newer request superseded the first.
    await eventually(
      () => framesOf(serverStream, "transfer-failed").find((f) => f.id === res.json.id && f.failureReason === "SUPERSEDED"),
      "superseded",
      WAIT_MS,
    );
  });

  it("a transfer whose target finishes is answered as failed to the holder and the requester", async () => {
    const proxyStream = await pluginStream("proxy-1");
    const requester = await pluginStream("lobby-1");
    await call("proxy-1", "POST", "/api/plugin/player-join", { uuid: uuid(4), name: "dave" });
    await call("lobby-1", "POST", "/api/plugin/player-join", { uuid: uuid(4), name: "dave" });
    const queued = await call("lobby-1", "POST", "/api/plugin/transfer", { playerUuid: uuid(4), targetInstanceId: "arena-1" });
    assert.equal(queued.status, 202, queued.text);
    const doc = (await t.instances.getDoc("arena-1"))!;
    await t.instances.save({ ...doc, state: "CRASHED" });
    t.events.publish("INSTANCE_STATE_CHANGED", { instanceId: "arena-1", group: "arena", nodeId: "n1", oldState: "RUNNING", newState: "CRASHED" });
    for (const stream of [proxyStream, requester]) {
      const failed = await eventually(() => framesOf(stream, "transfer-failed").find((f) => f.id === queued.json.id), "transfer-failed", WAIT_MS);
      assert.equal(failed.failureReason, "TARGET_GONE");
      assert.equal(failed.state, "FAILED");
    }
    assert.equal(await t.transfers.get(queued.json.id), null);
    // The crashed instance's players (bob) are off the network.
    await eventually(async () => (await t.players.get(uuid(2))) === null, "players of the crashed instance removed", WAIT_MS);
  });

  it("metrics: INSTANCE_METRICS on the stream, the latest snapshot over REST, group aggregates; bad payloads refused", async () => {
    const viewer = await t.tokenFor("VIEWER");
    const ticket = await t.request("POST", "/api/v1/events/ticket", { token: viewer });
    const general = await openSse(`${t.baseUrl}/api/v1/events/stream?ticket=${ticket.json.ticket}`);
    streams.push(general);
    await general.waitFor(1);
    expectError(await t.request("GET", "/api/v1/services/lobby-1/metrics", { token: viewer }), 404, "NOT_FOUND");
    expectError(await call("lobby-1", "POST", "/api/plugin/metrics", { tps1m: -1 }), 422, "VALIDATION_ERROR");
    const payload = {
      tps1m: 19.5,
      tps5m: 19.8,
      tps15m: 19.9,
      msptAvg: 31.2,
      heapUsedMb: 700,
      heapMaxMb: 2048,
      heapCommittedMb: 1024,
      gcCollections: 12,
      gcTimeMs: 340,
      threadCount: 40,
      daemonThreadCount: 20,
      playerCount: 1,
      maxPlayers: 50,
      worldCount: 1,
      totalEntities: 300,
      totalChunks: 900,
      worlds: [{ name: "world", environment: "NORMAL", entityCount: 300, chunkCount: 900, playerCount: 1 }],
      serverVersion: "1.21",
      pluginCount: 3,
      uptimeMs: 60_000,
    };
    const res = await call("lobby-1", "POST", "/api/plugin/metrics", payload);
    assert.equal(res.status, 200, res.text);
    const snapshot = (await t.request("GET", "/api/v1/services/lobby-1/metrics", { token: viewer })).json;
    assert.equal(snapshot.tps1m, 19.5);
    assert.equal(snapshot.group, "lobby");
    assert.deepEqual(snapshot.worlds, payload.worlds);
    const event = await eventually(
      () =>
        general.frames
          .filter(isMessage)
          .map(frameJson)
          .find((e) => e.type === "INSTANCE_METRICS"),
      "INSTANCE_METRICS",
      WAIT_MS,
    );
    assert.equal(event.source, "controller");
    assert.equal(event.data.instanceId, "lobby-1");
    assert.equal(event.data.msptAvg, 31.2);
    const group = (await t.request("GET", "/api/v1/groups/lobby/metrics", { token: viewer })).json;
    assert.equal(group.reportingInstances, 1);
    assert.equal(group.tps1mMin, 19.5);
    expectError(await t.request("GET", "/api/v1/groups/ghosts/metrics", { token: viewer }), 404, "NOT_FOUND");
    // The reported TPS goes into the next sample of the metrics history.
    await t.metricsHistory.sampleNow();
    const range = `from=${new Date(Date.now() - 3_600_000).toISOString()}&to=${new Date(Date.now() + 60_000).toISOString()}`;
    const history = await t.request("GET", `/api/v1/metrics/history?series=tps:lobby-1&${range}&step=60`, { token: viewer });
    assert.equal(history.status, 200, history.text);
    assert.equal(history.json.series[0].points.at(-1)?.[1], 19.5, history.text);
  });

  it("custom events: published with the instance as source, on other plugins' streams but not back to the sender", async () => {
    const own = await pluginStream("lobby-1");
    const other = await pluginStream("proxy-1");
    expectError(await call("lobby-1", "POST", "/api/plugin/events", { type: "PLAYER_CONNECTED", data: {} }), 422, "VALIDATION_ERROR");
    expectError(await call("lobby-1", "POST", "/api/plugin/events", { type: "party:invite", data: { blob: "x".repeat(40_000) } }), 422, "VALIDATION_ERROR");
    const res = await call("lobby-1", "POST", "/api/plugin/events", { type: "party:invite", data: { from: "alice", to: "bob" } });
    assert.deepEqual(res.json, { type: "party:invite", source: "lobby-1" });
    const seen = await eventually(() => messagesOf(other, "party:invite")[0], "custom event on the other plugin's stream", WAIT_MS);
    assert.equal(seen.source, "lobby-1");
    assert.deepEqual(seen.data, { from: "alice", to: "bob" });
    // A later event proves the sender's stream has moved past it.
    await call("proxy-1", "POST", "/api/plugin/events", { type: "party:ping", data: {} });
    await eventually(() => messagesOf(own, "party:ping")[0], "the later event", WAIT_MS);
    assert.equal(messagesOf(own, "party:invite").length, 0, "not echoed to its sender");
    assert.equal(
      own.frames
        .filter(isMessage)
        .map(frameJson)
        .filter((e) => e.type === "INSTANCE_METRICS").length,
      0,
      "other built-in types are not on plugin streams",
    );
  });

  it("X-Cloud-Sequence: each number once per start, reordering within the window, 400 for junk, 409 for repeats and old numbers", async () => {
    const token = t.credentials.issueWorkloadToken({ instanceId: "lobby-1", group: "lobby", node: "n1" }).token;
    const post = (seq: string) =>
      t.request("POST", "/api/plugin/events", { token, body: { type: "seq:test", data: {} }, headers: { "x-cloud-sequence": seq } });
    assert.equal((await post("1")).status, 200);
    expectError(await post("1"), 409, "SEQUENCE_REPEATED");
    assert.equal((await post("3")).status, 200);
    assert.equal((await post("2")).status, 200, "a reordered number inside the window");
    assert.equal((await post("100")).status, 200);
    expectError(await post("30"), 409, "SEQUENCE_TOO_OLD");
    expectError(await post("abc"), 400, "BAD_REQUEST");
    expectError(await post("0"), 400, "BAD_REQUEST");
    expectError(await post("-5"), 400, "BAD_REQUEST");
    expectError(await post("9007199254740992"), 400, "BAD_REQUEST");
    expectError(await post("12345678901234567"), 400, "BAD_REQUEST");
    // A new start of the same instance counts from 1 again.
    const restarted = t.credentials.issueWorkloadToken({ instanceId: "lobby-1", group: "lobby", node: "n1" }).token;
    const again = await t.request("POST", "/api/plugin/events", {
      token: restarted,
      body: { type: "seq:test", data: {} },
      headers: { "x-cloud-sequence": "1" },
    });
    assert.equal(again.status, 200, again.text);
    // traceparent is accepted (well-formed or not).
    const traced = await t.request("POST", "/api/plugin/events", {
      token,
      body: { type: "seq:test", data: {} },
      headers: { "x-cloud-sequence": "101", traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" },
    });
    assert.equal(traced.status, 200);
    // The SDK's numbers: the wall clock in microseconds, 16 digits.
    assert.equal((await post(String(Date.parse("2026-11-26T00:00:00Z") * 1000))).status, 200);
  });

  it("message/send: 400 for a bad body, 503 while no messaging module is loaded", async () => {
    expectError(await call("lobby-1", "POST", "/api/plugin/message/send", { fromUuid: uuid(1) }), 400, "BAD_REQUEST");
    const res = await call("lobby-1", "POST", "/api/plugin/message/send", {
      fromUuid: uuid(1),
      fromName: "alice",
      toUuid: uuid(2),
      toName: "bob",
      content: "hi",
    });
    expectError(res, 503, "MESSAGING_UNAVAILABLE");
  });

  it("revocation: one token, then every token of an instance, refused at once; audited; operators only", async () => {
    const admin = await t.tokenFor("ADMIN");
    const one = t.credentials.issueWorkloadToken({ instanceId: "lobby-1", group: "lobby", node: "n1" }).token;
    const other = t.credentials.issueWorkloadToken({ instanceId: "lobby-1", group: "lobby", node: "n1" }).token;
    assert.equal((await t.request("GET", "/api/plugin/players", { token: one })).status, 200);
    expectError(await t.request("POST", "/api/v1/workload-credentials/revoke", { token: await t.tokenFor("VIEWER"), body: { token: one } }), 403, "FORBIDDEN");
    expectError(await t.request("POST", "/api/v1/workload-credentials/revoke", { token: admin, body: { token: "wl.bogus.sig" } }), 422, "VALIDATION_ERROR");
    const revoked = await t.request("POST", "/api/v1/workload-credentials/revoke", { token: admin, body: { token: one } });
    assert.equal(revoked.status, 200, revoked.text);
    expectError(await t.request("GET", "/api/plugin/players", { token: one }), 401, "UNAUTHORIZED");
    assert.equal((await t.request("GET", "/api/plugin/players", { token: other })).status, 200, "the other token of the instance still works");

    expectError(await t.request("POST", "/api/v1/services/ghost-1/workload-credentials/revoke", { token: admin }), 404, "NOT_FOUND");
    const all = await t.request("POST", "/api/v1/services/lobby-1/workload-credentials/revoke", { token: admin });
    assert.equal(all.status, 200, all.text);
    expectError(await t.request("GET", "/api/plugin/players", { token: other }), 401, "UNAUTHORIZED");
    expectError(await t.request("GET", "/api/plugin/players", { token: tokens["lobby-1"] }), 401, "UNAUTHORIZED");
    assert.equal((await t.request("GET", "/api/plugin/players", { token: tokens["arena-2"] })).status, 200, "other instances unaffected");

    const audit = await t.request("GET", "/api/v1/audit?limit=50", { token: admin });
    const actions = JSON.stringify(audit.json);
    assert.match(actions, /workload-credential\.revoke"/);
    assert.match(actions, /workload-credential\.revoke-instance/);
  });
});

describe("plugin API: token rotation", () => {
  let t: TestApp;
  const clock = new FakeClock(Date.parse("2026-03-01T12:00:00Z"));

  before(async () => {
    t = await startTestApp({ clock });
    await t.groups.create({ name: "lobby", platform: "paper" });
    await t.nodes.upsert("n1", { host: "10.0.0.1" });
    await t.instances.save({
      id: "lobby-1",
      group: "lobby",
      node: "n1",
      port: 30000,
      memoryMb: 512,
      state: "RUNNING",
      playerCount: 0,
      startedAt: null,
      deploymentRevision: 1,
    });
  });
  after(() => t.close());

  it("refresh rotates: the new token works, the old one only for the 10 s grace, on the same start's sequence", async () => {
    const old = t.credentials.issueWorkloadToken({ instanceId: "lobby-1", group: "lobby", node: "n1" }).token;
    const seq = (token: string, n: number, path = "/api/plugin/events", body: unknown = { type: "rot:x", data: {} }) =>
      t.request("POST", path, { token, body, headers: { "x-cloud-sequence": String(n) } });
    assert.equal((await seq(old, 1)).status, 200);
    const refreshed = await seq(old, 2, "/api/plugin/auth/refresh", undefined);
    assert.equal(refreshed.status, 200, refreshed.text);
    const fresh = refreshed.json.token as string;
    assert.notEqual(fresh, old);
    assert.equal((await seq(fresh, 3)).status, 200, "the new token");
    expectRepeat(await seq(fresh, 2), "the sequence continues across the rotation");
    clock.advance(9_000);
    assert.equal((await seq(old, 4)).status, 200, "the old token within the grace");
    clock.advance(1_000);
    const late = await seq(old, 5);
    assert.equal(late.status, 401, late.text);
    assert.equal((await seq(fresh, 6)).status, 200);
  });

  function expectRepeat(res: TestResponse, what: string) {
    assert.equal(res.status, 409, what);
    assert.equal(res.json.error.code, "SEQUENCE_REPEATED", what);
  }
});

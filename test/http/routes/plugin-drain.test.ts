/**
 * Players first, on the real HTTP app: an instance going DRAINING has its players moved through
 * the transfer path (each transfer delivered to the holder's plugin event stream, `requestedBy`
 * naming the drain), least loaded first and never beyond the group's `maxPlayers`; a DRAINING
 * instance is never a transfer target; without room the players stay until an instance of the
 * group becomes RUNNING; a transfer heading to an instance that starts draining goes elsewhere; a
 * peer's copy of the state change (the event bridge) moves nobody; a peer's leave that empties a
 * draining instance reaches the scheduler of the controller draining it.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { InstanceState } from "../../../src/domain/instances/instance-schemas.js";
import { drainEmptyCheckIntervalMs, drainRequester } from "../../../src/plugin-api/drain-transfers.js";
import { startTestApp, type TestApp, type TestResponse } from "../../support/http-app.js";
import { frameJson, openSse, type SseStream } from "../../support/sse-client.js";
import { eventually } from "../../support/wait.js";

const uuid = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, "0")}`;
const WAIT_MS = 15_000;

describe("draining instances hand their players over", () => {
  let t: TestApp;
  const tokens: Record<string, string> = {};
  const streams: SseStream[] = [];
  let sequence = 5000;

  const call = (instance: string, method: string, path: string, body?: unknown): Promise<TestResponse> =>
    t.request(method, path, { token: tokens[instance], body, headers: method === "POST" ? { "x-cloud-sequence": String(++sequence) } : {} });
  const join = async (instance: string, n: number, name: string) => {
    const res = await call(instance, "POST", "/api/plugin/player-join", { uuid: uuid(n), name });
    assert.equal(res.status, 200, res.text);
  };
  const add = async (id: string, group: string, state: InstanceState) => {
    await t.instances.save({ id, group, node: "n1", port: 30000, memoryMb: 512, state, playerCount: 0, startedAt: null, deploymentRevision: 1 });
    tokens[id] = t.credentials.issueWorkloadToken({ instanceId: id, group, node: "n1" }).token;
  };
  /** What the scheduler does when the actor moves: the record first, then the event (from this controller or a peer). */
  const moveTo = async (id: string, state: InstanceState, source?: string) => {
    const doc = (await t.instances.getDoc(id))!;
    await t.instances.save({ ...doc, state });
    t.events.publish("INSTANCE_STATE_CHANGED", { instanceId: id, group: doc.group, nodeId: "n1", oldState: doc.state, newState: state }, source);
  };
  const pluginStream = async (instance: string): Promise<SseStream> => {
    const ticket = await call(instance, "POST", "/api/plugin/events/ticket");
    assert.equal(ticket.status, 200, ticket.text);
    const stream = await openSse(`${t.baseUrl}/api/v1/events/stream?ticket=${ticket.json.ticket}`);
    streams.push(stream);
    await stream.waitFor(1);
    return stream;
  };
  const transfersOn = (stream: SseStream): any[] => stream.frames.filter((f) => f.event === "transfer").map(frameJson);
  const pendingFor = async (player: number) => (await t.transfers.pending()).filter((p) => p.playerUuid === uuid(player));

  before(async () => {
    t = await startTestApp({ config: { rateLimit: { perIpPerMinute: 1_000_000, perUserPerMinute: 1_000_000 } } });
    await t.groups.create({ name: "proxy", platform: "velocity" });
    await t.groups.create({ name: "lobby", platform: "paper", maxPlayers: 2 });
    await t.groups.create({ name: "small", platform: "paper", maxPlayers: 1 });
    await t.nodes.upsert("n1", { host: "10.0.0.1" });
    await add("proxy-1", "proxy", "RUNNING");
    for (const id of ["lobby-1", "lobby-2", "lobby-3"]) await add(id, "lobby", "RUNNING");
    for (const id of ["small-1", "small-2"]) await add(id, "small", "RUNNING");
  });
  after(async () => {
    for (const stream of streams) stream.close();
    await t.close();
  });

  it("moves each player of a draining instance to the least-loaded RUNNING instance of the group, through its holder", async () => {
    // alice through the proxy, bob straight onto lobby-1 (lobby-1 holds him), carol on lobby-2.
    await call("proxy-1", "POST", "/api/plugin/player-join", { uuid: uuid(1), name: "alice" });
    await join("lobby-1", 1, "alice");
    await join("lobby-1", 2, "bob");
    await join("lobby-2", 3, "carol");
    const proxyStream = await pluginStream("proxy-1");
    const lobbyStream = await pluginStream("lobby-1");

    await moveTo("lobby-1", "DRAINING");
    const [toAlice] = await eventually(
      () => (transfersOn(proxyStream).length ? transfersOn(proxyStream) : null),
      "alice's transfer on the proxy's stream",
      WAIT_MS,
    );
    const [toBob] = await eventually(() => (transfersOn(lobbyStream).length ? transfersOn(lobbyStream) : null), "bob's transfer on lobby-1's stream", WAIT_MS);
    assert.equal(toAlice.playerUuid, uuid(1));
    assert.equal(toAlice.targetInstanceId, "lobby-3", "the emptiest RUNNING instance");
    assert.equal(toAlice.holderInstanceId, "proxy-1");
    assert.equal(toAlice.fromInstanceId, "lobby-1");
    assert.equal(toAlice.targetGroup, "lobby");
    assert.equal(toAlice.requestedBy, drainRequester("lobby-1"));
    assert.equal(toAlice.requestedBy, "drain:lobby-1");
    assert.equal(toBob.playerUuid, uuid(2));
    assert.equal(toBob.holderInstanceId, "lobby-1", "bob joined lobby-1 directly: it moves him");
    assert.equal(toBob.targetInstanceId, "lobby-2", "lobby-2 and lobby-3 hold one each now: the lowest id");
    assert.equal(await t.transfers.pendingCount(), 2);

    // Nobody is sent to the draining instance.
    const direct = await call("lobby-2", "POST", "/api/plugin/transfer", { playerUuid: uuid(3), targetInstanceId: "lobby-1" });
    assert.equal(direct.status, 409, direct.text);
    assert.equal(direct.json.error.code, "INVALID_STATE");

    // The holders move them: the targets report the joins, the drain is empty.
    await join("lobby-3", 1, "alice");
    await join("lobby-2", 2, "bob");
    await eventually(async () => (await t.transfers.pendingCount()) === 0, "both transfers completed", WAIT_MS);
    assert.equal(await t.players.countOn("lobby-1"), 0);
    assert.equal((await t.instances.get("lobby-1")).playerCount, 0);
    // The holder is told on its stream once the transfer ended: after the record is gone, not with it.
    await eventually(
      () => lobbyStream.frames.filter((f) => f.event === "transfer-completed").length >= 1,
      "bob's transfer-completed on lobby-1's stream",
      WAIT_MS,
    );
    assert.equal(lobbyStream.frames.filter((f) => f.event === "transfer-completed").length, 1);

    // lobby-1 is the emptiest, but DRAINING: transfer-to-group passes it by.
    const toGroup = await call("proxy-1", "POST", "/api/plugin/transfer-to-group", { playerUuid: uuid(3), group: "lobby" });
    assert.equal(toGroup.status, 202, toGroup.text);
    assert.equal(toGroup.json.targetInstanceId, "lobby-3");
    await join("lobby-3", 3, "carol");
    await eventually(async () => (await t.transfers.pendingCount()) === 0, "carol's transfer completed", WAIT_MS);
  });

  it("without room the players stay; an instance of the group becoming RUNNING takes them", async () => {
    await join("small-1", 10, "dave");
    await join("small-2", 11, "erin");
    await moveTo("small-1", "DRAINING");
    // small-2 is full (maxPlayers 1): nothing to send dave to.
    const result = await t.drainTransfers.moveOff("small-1", "small");
    assert.deepEqual(result, { requested: 0, underway: 0, stayed: 1 });
    assert.deepEqual(await pendingFor(10), [], "no transfer queued without room");
    assert.ok(
      t.logLines.some((l) => l.includes("Drain of small-1") && l.includes("1 stay")),
      "the players left in place are logged",
    );

    const stream = await pluginStream("small-1");
    await add("small-3", "small", "STARTING");
    await moveTo("small-3", "RUNNING");
    const [transfer] = await eventually(
      async () => {
        const pending = await pendingFor(10);
        return pending.length ? pending : null;
      },
      "dave's transfer once small-3 runs",
      WAIT_MS,
    );
    assert.equal(transfer.targetInstanceId, "small-3");
    assert.equal(transfer.requestedBy, "drain:small-1");
    await eventually(() => transfersOn(stream).find((f) => f.id === transfer.id), "delivered to small-1, which holds dave", WAIT_MS);

    // A second attempt changes nothing: the transfer is under way.
    assert.deepEqual(await t.drainTransfers.moveOff("small-1", "small"), { requested: 0, underway: 1, stayed: 0 });
    assert.equal((await pendingFor(10)).length, 1);

    // small-1 holds him and moves him: the join on the target completes the transfer.
    await join("small-3", 10, "dave");
    await eventually(async () => (await pendingFor(10)).length === 0, "dave arrived", WAIT_MS);
    assert.equal(await t.players.countOn("small-1"), 0);
  });

  it("a pending transfer heading to an instance that starts draining is sent to another one", async () => {
    // frank on lobby-2, asked to go to lobby-3 by a plugin; then lobby-3 drains before he arrives.
    await join("lobby-2", 20, "frank");
    const queued = await call("lobby-2", "POST", "/api/plugin/transfer", { playerUuid: uuid(20), targetInstanceId: "lobby-3" });
    assert.equal(queued.status, 202, queued.text);
    await add("lobby-4", "lobby", "RUNNING");
    await add("lobby-6", "lobby", "RUNNING");
    await moveTo("lobby-3", "DRAINING");
    const [redirected] = await eventually(
      async () => {
        const pending = (await pendingFor(20)).filter((p) => p.id !== queued.json.id);
        return pending.length ? pending : null;
      },
      "frank's transfer sent elsewhere",
      WAIT_MS,
    );
    assert.equal(await t.transfers.get(queued.json.id), null, "the older transfer was superseded");
    // alice (1) and carol (3), on lobby-3, and frank (20) spread over the two empty instances, lowest id first on ties;
    // lobby-2 is full (bob and frank) and is frank's own.
    await eventually(async () => (await t.transfers.pending()).filter((p) => p.requestedBy === "drain:lobby-3").length === 3, "three drain transfers", WAIT_MS);
    const targets = Object.fromEntries(
      (await t.transfers.pending()).filter((p) => p.requestedBy === "drain:lobby-3").map((p) => [p.playerName, p.targetInstanceId]),
    );
    assert.deepEqual(targets, { alice: "lobby-4", carol: "lobby-6", frank: "lobby-4" });
    assert.equal(redirected.targetInstanceId, "lobby-4");
    assert.equal(redirected.fromInstanceId, "lobby-2");
  });

  it("a draining instance emptied by a leave on another controller is reported empty here", async () => {
    // lobby-1 drains here and has no player left; its record still counts some (the leave was written elsewhere).
    const doc = (await t.instances.getDoc("lobby-1"))!;
    await t.instances.save({ ...doc, playerCount: 3 });
    const bye = { uuid: uuid(2), name: "bob", instanceId: "lobby-1", group: "lobby" };
    t.events.publish("PLAYER_DISCONNECTED", bye, "peer:controller-2");
    await eventually(async () => (await t.instances.get("lobby-1")).playerCount === 0, "the count 0 reported by the drain's controller", WAIT_MS);
  });

  it("a draining instance emptied by a move through another controller (no event crosses) is found empty by the roster check", async () => {
    const doc = (await t.instances.getDoc("lobby-1"))!;
    await t.instances.save({ ...doc, playerCount: 2 });
    await eventually(
      async () => (await t.instances.get("lobby-1")).playerCount === 0,
      "the count 0 from the periodic roster check",
      drainEmptyCheckIntervalMs * 3,
    );
  });

  it("prefers the newest deployment revision: the older instances retire next in a rollout", async () => {
    await t.groups.create({ name: "web", platform: "paper", maxPlayers: 10 });
    await add("web-1", "web", "RUNNING");
    await add("web-2", "web", "RUNNING");
    await add("web-3", "web", "RUNNING");
    const doc = (await t.instances.getDoc("web-3"))!;
    await t.instances.save({ ...doc, deploymentRevision: 2 });
    await join("web-1", 40, "hal");
    await join("web-3", 41, "ivy");
    await moveTo("web-1", "DRAINING");
    const [transfer] = await eventually(
      async () => {
        const pending = await pendingFor(40);
        return pending.length ? pending : null;
      },
      "hal's transfer",
      WAIT_MS,
    );
    assert.equal(transfer.targetInstanceId, "web-3", "revision 2, though web-2 (revision 1) is emptier");
  });

  it("a peer's copy of the state change moves nobody: the controller whose actor drains does it", async () => {
    await add("lobby-5", "lobby", "RUNNING");
    await join("lobby-5", 30, "gina");
    const before = await t.transfers.pendingCount();
    await moveTo("lobby-5", "DRAINING", "peer:controller-2");
    // Give a wrongly subscribed handler time to act, then check nothing was queued.
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.equal(await t.transfers.pendingCount(), before);
    assert.equal(t.drainTransfers.isDraining("lobby-5"), false);
  });
});

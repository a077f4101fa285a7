/**
 * Who may read the event stream, and what each reader gets (docs/decisions/events.md, "Who reads
 * the stream"): `events.view` opens it (ADMIN, OPERATOR and VIEWER hold it; a user without roles
 * and a daemon's node credential do not), and each event reaches a client only when the user also
 * holds the view permission of the surface it describes (players.view for player events,
 * nodes.view for node events, ...). Checked with a user without roles, a VIEWER, and custom roles,
 * over a real server; a role taken away while a stream is open ends it.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { EventTypes } from "../../../src/events/event-types.js";
import { EVENT_STREAM_PERMISSIONS_REFRESH_MS } from "../../../src/events/event-access.js";
import { FakeClock } from "../../support/fake-clock.js";
import { startTestApp, type TestApp } from "../../support/http-app.js";
import { frameJson, isMessage, openSse, type SseStream } from "../../support/sse-client.js";
import { eventually } from "../../support/wait.js";

describe("event stream permission", () => {
  let t: TestApp;
  let clock: FakeClock;
  let admin: string;
  const streams: SseStream[] = [];

  const userWith = async (username: string, roles: string[]): Promise<string> => {
    await t.auth.users.create({ username, password: `${username}-password`, roles });
    return t.login(username, `${username}-password`);
  };
  const role = async (name: string, permissions: string[]) => {
    const res = await t.request("POST", "/api/v1/roles", { token: admin, body: { name, permissions } });
    assert.equal(res.status, 201, res.text);
  };
  const open = async (token: string): Promise<SseStream> => {
    const ticket = await t.request("POST", "/api/v1/events/ticket", { token });
    assert.equal(ticket.status, 200, ticket.text);
    const stream = await openSse(`${t.baseUrl}/api/v1/events/stream?ticket=${ticket.json.ticket}`);
    streams.push(stream);
    const [connected] = await stream.waitFor(1);
    assert.equal(connected.event, "connected");
    return stream;
  };

  /** One event of every kind of surface, then a marker; waits until the journal holds the marker. */
  const publishOneOfEach = async (marker: string): Promise<void> => {
    t.events.publish(EventTypes.PLAYER_CONNECTED, { uuid: "00000000-0000-4000-8000-000000000001", name: "alice", instanceId: "lobby-1", group: "lobby" });
    t.events.publish(EventTypes.NODE_STATUS, { nodeId: "n1", cpuUsage: 0.5, usedMemoryMb: 1, totalMemoryMb: 2, lastHeartbeatAt: "2026-01-01T00:00:00Z" });
    t.events.publish(EventTypes.INSTANCE_STATE_CHANGED, { instanceId: "lobby-1", group: "lobby", nodeId: "n1", oldState: "STARTING", newState: "RUNNING" });
    t.events.publish(EventTypes.INSTANCE_CRASHED, {
      instanceId: "lobby-1",
      group: "lobby",
      nodeId: "n1",
      exitCode: 1,
      classification: "CRASH",
      logTail: ["secret line"],
      uptimeMs: 1,
    });
    t.events.publish(EventTypes.GROUP_CREATED, { groupName: "lobby" });
    t.events.publish(EventTypes.TEMPLATE_UPDATED, { templateName: "base", oldHash: null, newHash: "ab" });
    t.events.publish("TEST:CUSTOM", { marker });
    const journal = t.eventStream.journal;
    await eventually(() => {
      for (let seq = journal.latestSequence; seq >= journal.earliestSequence && seq > journal.latestSequence - 64; seq--) {
        if (journal.entry(seq)?.json.includes(marker)) return true;
      }
      return false;
    }, `the marker ${marker} journaled`);
  };
  const PUBLISHED = new Set([
    "PLAYER_CONNECTED",
    "NODE_STATUS",
    "INSTANCE_STATE_CHANGED",
    "INSTANCE_CRASHED",
    "GROUP_CREATED",
    "TEMPLATE_UPDATED",
    "TEST:CUSTOM",
  ]);
  /** The types of the events {@link publishOneOfEach} published with `marker` that reached `stream` (others, such as aggregates, left out). */
  const typesUntil = async (stream: SseStream, marker: string): Promise<string[]> => {
    await stream.waitFor(1, (f) => isMessage(f) && f.data.includes(marker));
    const messages = stream.frames.filter(isMessage).map((f) => ({ type: frameJson(f).type as string, data: f.data }));
    const end = messages.findIndex((m) => m.data.includes(marker));
    let start = end - 1;
    while (start >= 0 && messages[start].type !== "TEST:CUSTOM") start--;
    return messages
      .slice(start + 1, end + 1)
      .map((m) => m.type)
      .filter((type) => PUBLISHED.has(type));
  };

  before(async () => {
    clock = new FakeClock(Date.now());
    t = await startTestApp({ clock });
    admin = await t.tokenFor("ADMIN");
  });
  after(async () => {
    for (const stream of streams) stream.close();
    await t.close();
  });

  it("is in the catalog, held by ADMIN, OPERATOR and VIEWER", async () => {
    const catalog = (await t.request("GET", "/api/v1/permissions", { token: admin })).json as { name: string }[];
    const names = catalog.map((p) => p.name);
    assert.ok(names.includes("events.view"), names.join(","));
    assert.ok(names.includes("players.view"), names.join(","));
    const roles = (await t.request("GET", "/api/v1/roles", { token: admin })).json as { name: string; permissions: string[] }[];
    for (const name of ["ADMIN", "OPERATOR", "VIEWER"]) {
      const found = roles.find((r) => r.name === name)!;
      assert.ok(found.permissions.includes("events.view"), `${name} holds events.view`);
      assert.ok(found.permissions.includes("players.view"), `${name} holds players.view`);
    }
  });

  it("refuses a user without roles with 403, on the ticket and on the stream", async () => {
    const nobody = await userWith("nobody", []);
    assert.equal((await t.request("GET", "/api/v1/groups", { token: nobody })).status, 403);
    const ticket = await t.request("POST", "/api/v1/events/ticket", { token: nobody });
    assert.equal(ticket.status, 403, ticket.text);
    assert.equal(ticket.json.error.code, "FORBIDDEN");
    assert.match(ticket.json.error.message, /events\.view/);

    // A ticket of that user (issued while it held a role, or by any other path) does not open the stream.
    const issued = await t.eventStream.tickets.issue({ kind: "events", username: "nobody" });
    const stream = await fetch(`${t.baseUrl}/api/v1/events/stream?ticket=${issued.ticket}`);
    assert.equal(stream.status, 403);
    const body = (await stream.json()) as { error: { code: string; status: number } };
    assert.deepEqual([body.error.code, body.error.status], ["FORBIDDEN", 403]);
  });

  it("refuses a daemon's node credential: it reads templates, not the cluster's events", async () => {
    const node = t.credentials.issueNodeCredential("n1").token;
    const ticket = await t.request("POST", "/api/v1/events/ticket", { token: node });
    assert.equal(ticket.status, 403, ticket.text);
  });

  it("a VIEWER gets every kind of event", async () => {
    const stream = await open(await t.tokenFor("VIEWER"));
    await publishOneOfEach("viewer-marker");
    const types = await typesUntil(stream, "viewer-marker");
    for (const type of ["PLAYER_CONNECTED", "NODE_STATUS", "INSTANCE_STATE_CHANGED", "INSTANCE_CRASHED", "GROUP_CREATED", "TEMPLATE_UPDATED", "TEST:CUSTOM"]) {
      assert.ok(types.includes(type), `${type} in ${types.join(",")}`);
    }
    stream.close();
  });

  it("a custom role gets the events of the surfaces it can view, and only those", async () => {
    await role("group-watcher", ["events.view", "groups.view"]);
    const watcher = await userWith("watcher", ["group-watcher"]);
    const stream = await open(watcher);
    await publishOneOfEach("watcher-marker");
    const types = await typesUntil(stream, "watcher-marker");
    assert.deepEqual(types, ["GROUP_CREATED", "TEST:CUSTOM"], "no players, nodes, instances, crashes or templates");
    assert.ok(!stream.frames.some((f) => f.data.includes("alice")), "no player's name on the wire");
    assert.ok(!stream.frames.some((f) => f.data.includes("secret line")), "no crash log on the wire");

    await role("player-watcher", ["events.view", "players.view", "instances.view"]);
    const players = await userWith("players", ["player-watcher"]);
    const second = await open(players);
    await publishOneOfEach("players-marker");
    assert.deepEqual(await typesUntil(second, "players-marker"), ["PLAYER_CONNECTED", "INSTANCE_STATE_CHANGED", "TEST:CUSTOM"]);
    stream.close();
    second.close();
  });

  it("a custom role that views groups but not events gets 403", async () => {
    await role("groups-only", ["groups.view"]);
    const groupsOnly = await userWith("groups-only-user", ["groups-only"]);
    assert.equal((await t.request("GET", "/api/v1/groups", { token: groupsOnly })).status, 200);
    assert.equal((await t.request("POST", "/api/v1/events/ticket", { token: groupsOnly })).status, 403);
  });

  it("a role taken away ends an open stream with an error event, and a narrowed role narrows it", async () => {
    const token = await userWith("fading", ["VIEWER"]);
    const stream = await open(token);
    await eventually(() => t.eventStream.hub.clientCount > 0, "the client streaming");
    const narrowed = await t.request("PATCH", "/api/v1/users/fading", { token: admin, body: { roles: ["group-watcher"] } });
    assert.equal(narrowed.status, 200, narrowed.text);
    clock.advance(EVENT_STREAM_PERMISSIONS_REFRESH_MS);
    // The refresh reads the directory: wait until the narrowed view applies, then check it.
    let round = 0;
    await eventually(async () => {
      const marker = `narrowed-${++round}`;
      await publishOneOfEach(marker);
      const types = await typesUntil(stream, marker);
      return types.at(-2) === "GROUP_CREATED";
    }, "the narrowed role applies to the open stream");

    const removed = await t.request("PATCH", "/api/v1/users/fading", { token: admin, body: { roles: [] } });
    assert.equal(removed.status, 200, removed.text);
    clock.advance(EVENT_STREAM_PERMISSIONS_REFRESH_MS);
    const [error] = await stream.waitFor(1, (f) => f.event === "error", 10_000);
    assert.deepEqual(frameJson(error), { message: "Forbidden" });
    await stream.ended;
  });
});

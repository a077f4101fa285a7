// Cluster-shared config across two real controller processes in one Raft cluster (development
// profile: each has its own store and event stream, so each stream shows only what that controller
// published): a patch made on one controller is in force on the other without a restart, a patch
// on the follower is handed to the leader, and CLUSTER_CONFIG_CHANGED comes only from the
// controller that proposed the change, never from one that merely applied it.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { frameJson, isMessage, openSse, type SseStream } from "../support/sse-client.js";
import { eventually } from "../support/wait.js";
import { ClusterHarness, type ClusterMemberProcess } from "./cluster-harness.js";

describe("cluster-shared config over two controllers", { timeout: 600_000 }, () => {
  const harness = new ClusterHarness();
  const streams: SseStream[] = [];
  let a: ClusterMemberProcess;
  let b: ClusterMemberProcess;

  before(async () => {
    a = await harness.start("a");
    b = await harness.start("b", { joinToken: await harness.joinToken(a, [a]) });
  });
  after(async () => {
    for (const stream of streams) stream.close();
    await harness.close();
  });

  const stream = async (member: ClusterMemberProcess) => {
    const ticket = await member.call("POST", "/api/v1/events/ticket");
    assert.equal(ticket.status, 200, ticket.text);
    const s = await openSse(`${member.process!.url}/api/v1/events/stream?${new URLSearchParams({ ticket: ticket.json.ticket })}`);
    streams.push(s);
    return s;
  };
  const configChanges = (s: SseStream) =>
    s.frames
      .filter(isMessage)
      .map(frameJson)
      .filter((e) => e.type === "CLUSTER_CONFIG_CHANGED")
      .map((e) => e.data.version);
  const inForce = async (member: ClusterMemberProcess, key: string) => {
    const res = await member.call("GET", "/api/v1/cluster/config");
    assert.equal(res.status, 200, res.text);
    const setting = (res.json.effective as { key: string; value: unknown; source: string }[]).find((s) => s.key === key)!;
    return `${setting.value} ${setting.source} v${res.json.activeVersion}`;
  };

  it("a patch on either controller is in force on both, announced only by its proposer", async () => {
    const [onA, onB] = [await stream(a), await stream(b)];
    assert.equal(await inForce(a, "crashes.crashLoopThreshold"), "3 controller.yml vnull");

    const first = await b.call("PATCH", "/api/v1/cluster/config", { settings: { "crashes.crashLoopThreshold": 6 }, comment: "from b" });
    assert.equal(first.status, 200, first.text);
    assert.equal(first.json.activeVersion, 1);
    await eventually(async () => (await inForce(a, "crashes.crashLoopThreshold")) === "6 cluster v1", "version 1 in force on a");

    const second = await a.call("PATCH", "/api/v1/cluster/config", { settings: { "share.enabled": true } });
    assert.equal(second.status, 200, second.text);
    assert.deepEqual([second.json.activeVersion, second.json.parentVersion], [2, 1]);
    await eventually(async () => (await inForce(b, "share.enabled")) === "true cluster v2", "version 2 in force on b");

    const third = await b.call("POST", "/api/v1/cluster/config/rollback", { version: 1 });
    assert.equal(third.status, 200, third.text);
    await eventually(async () => (await inForce(a, "share.enabled")) === "false controller.yml v1", "the rollback in force on a");

    // Each stream is in the order its controller published; a controller that applied another's
    // change and published it would show that version before its own later one.
    await onA.waitFor(1, (f) => isMessage(f) && frameJson(f).type === "CLUSTER_CONFIG_CHANGED");
    await onB.waitFor(2, (f) => isMessage(f) && frameJson(f).type === "CLUSTER_CONFIG_CHANGED");
    const probe = await a.call("PATCH", "/api/v1/cluster/config", { settings: { "scheduler.auditRetentionDays": 30 } });
    assert.equal(probe.json.activeVersion, 3);
    await onA.waitFor(2, (f) => isMessage(f) && frameJson(f).type === "CLUSTER_CONFIG_CHANGED");
    assert.deepEqual(configChanges(onA), [2, 3], "a announced its own versions only");
    await eventually(async () => (await inForce(b, "scheduler.auditRetentionDays")) === "30 cluster v3", "version 3 in force on b");
    const lastOnB = await b.call("PATCH", "/api/v1/cluster/config", { settings: { "scheduler.auditRetentionDays": 31 } });
    assert.equal(lastOnB.json.activeVersion, 4);
    await onB.waitFor(3, (f) => isMessage(f) && frameJson(f).type === "CLUSTER_CONFIG_CHANGED");
    assert.deepEqual(configChanges(onB), [1, 1, 4], "b announced its patch, its rollback to 1 and its last patch only");
  });
});

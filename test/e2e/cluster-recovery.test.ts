// Losing the quorum and recovering from it, with three real controller processes (development
// profile): with two of three gone, reads still answer and writes fail with 503 RAFT_UNAVAILABLE;
// POST /api/v1/cluster/recover refuses while a named member still answers or a member is left
// unnamed, then makes the survivor the only member; the cluster commits again and grows again.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { ClusterHarness, type ClusterMemberProcess } from "./cluster-harness.js";
import { eventually } from "../support/wait.js";

describe("recovery after losing the quorum", { timeout: 600_000 }, () => {
  const harness = new ClusterHarness();
  let a: ClusterMemberProcess;
  let b: ClusterMemberProcess;
  let c: ClusterMemberProcess;
  const ids = new Map<string, string>();
  let clusterId: string;

  before(async () => {
    a = await harness.start("a");
    b = await harness.start("b", { joinToken: await harness.joinToken(a, [a]) });
    c = await harness.start("c", { joinToken: await harness.joinToken(a, [a, b]) });
    for (const m of [a, b, c]) ids.set(m.name, (await m.call("GET", "/api/v1/cluster")).json.nodeId);
    clusterId = (await a.call("GET", "/api/v1/cluster")).json.clusterId;
    await eventually(
      async () => ((await a.call("GET", "/api/v1/cluster/members")).json.members as any[]).every((m) => m.role === "voter" && m.gRPCAddr),
      "three voters",
    );
  });
  after(() => harness.close());

  it("refuses while a named member still answers, and when a member is left unnamed", async () => {
    await harness.kill9(c);
    const reachable = await a.call("POST", "/api/v1/cluster/recover", { eject: [ids.get("b"), ids.get("c")], reason: "datacenter lost" });
    assert.equal(reachable.status, 409, reachable.text);
    assert.equal(reachable.json.error.code, "MEMBERS_REACHABLE");
    assert.match(reachable.json.error.message, new RegExp(ids.get("b")!));
    const incomplete = await a.call("POST", "/api/v1/cluster/recover", { eject: [ids.get("c")] });
    assert.equal(incomplete.status, 409);
    assert.equal(incomplete.json.error.code, "RECOVERY_INCOMPLETE");
    const unknown = await a.call("POST", "/api/v1/cluster/recover", { eject: ["ctl-000000000000"] });
    assert.equal(unknown.status, 404);
    assert.equal(unknown.json.error.code, "MEMBER_NOT_FOUND");
    const bad = await a.call("POST", "/api/v1/cluster/recover", { eject: [] });
    assert.equal(bad.status, 422);
    assert.equal((await a.call("GET", "/api/v1/cluster")).json.memberCount, 3, "a refused recovery changes nothing");
  });

  it("with two of three gone: reads answer, writes fail with 503 RAFT_UNAVAILABLE within the bound", async () => {
    await harness.kill9(b);
    const started = Date.now();
    const write = await a.call("POST", "/api/v1/cluster/join-tokens", { joinAddrs: [a.grpcAddr] });
    assert.equal(write.status, 503, write.text);
    assert.equal(write.json.error.code, "RAFT_UNAVAILABLE");
    assert.ok(Date.now() - started < 15_000, `answered within the bound (${Date.now() - started} ms)`);
    const rotate = await a.call("POST", "/api/v1/cluster/seed/rotate");
    assert.equal(rotate.status, 503);
    const read = await a.call("GET", "/api/v1/cluster");
    assert.equal(read.status, 200);
    assert.equal(read.json.memberCount, 3);
    assert.equal((await a.call("GET", "/api/v1/cluster/join-tokens")).status, 200);
  });

  it("recover makes the survivor the only member; it commits again and a new controller joins", async () => {
    const recovered = await a.call("POST", "/api/v1/cluster/recover", { eject: [ids.get("b"), ids.get("c")], reason: "datacenter lost" });
    assert.equal(recovered.status, 200, recovered.text);
    assert.deepEqual(recovered.json, { clusterId, nodeId: ids.get("a"), ejected: [ids.get("b"), ids.get("c")], memberCount: 1 });
    const record = await eventually(async () => {
      const r = (await a.call("GET", "/api/v1/cluster")).json;
      return r.leaderId === r.nodeId ? r : null;
    }, "the survivor leads");
    assert.equal(record.memberCount, 1);
    assert.equal(record.clusterId, clusterId);
    const audit = (await a.call("GET", "/api/v1/audit?pageSize=100")).json.data as any[];
    assert.ok(audit.some((r) => r.action === "cluster.recovered"));
    assert.equal(audit.filter((r) => r.action === "cluster.member.ejected").length, 2);

    const d = await harness.start("d", { joinToken: await harness.joinToken(a, [a], "after recovery") });
    assert.equal((await d.call("GET", "/api/v1/cluster")).json.clusterId, clusterId);
    await eventually(async () => {
      const members = (await a.call("GET", "/api/v1/cluster/members")).json.members as any[];
      return members.length === 2 && members.every((m) => m.role === "voter");
    }, "two voters after the join");
    const restartedA = await (async () => {
      await harness.stop(a);
      return a.process!.restart();
    })();
    a.process = restartedA;
    const afterRestart = (await a.call("GET", "/api/v1/cluster")).json;
    assert.equal(afterRestart.memberCount, 2, "the recovered configuration survives a restart");
  });
});

// Three (and more) real controller processes on the development profile forming one Raft cluster:
// joining with join tokens (learner, then voter; cluster.id written to controller.yml, the token
// file deleted), writes on followers handed to the leader, a seed rotation invalidating a token,
// refused joins keeping the token file, eject, leave (the leader hands off and the controller
// stops), and a restarted member keeping its identity. The document store is not under test here,
// so each controller keeps its own embedded store (cluster-production.test.ts covers a shared
// PostgreSQL database).
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { rmSync, writeFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";
import { newSeedSecret, signJoinToken } from "../../src/cluster/identity/join-token.js";
import { ClusterHarness, type ClusterMemberProcess } from "./cluster-harness.js";
import { eventually } from "../support/wait.js";

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("cluster membership with real controller processes", { timeout: 600_000 }, () => {
  const harness = new ClusterHarness();
  let a: ClusterMemberProcess;
  let b: ClusterMemberProcess;
  let c: ClusterMemberProcess;
  let clusterId: string;
  const ids = new Map<string, string>();

  before(async () => {
    a = await harness.start("a");
    const record = (await a.call("GET", "/api/v1/cluster")).json;
    clusterId = record.clusterId;
    ids.set("a", record.nodeId);
  });
  after(() => harness.close());

  const membersOf = async (m: ClusterMemberProcess) => (await m.call("GET", "/api/v1/cluster/members")).json.members as any[];

  it("a second controller joins with a token: learner then voter, cluster.id in its controller.yml, the token file deleted", async () => {
    const token = await harness.joinToken(a, [a], "second");
    b = await harness.start("b", { joinToken: token });
    const record = (await b.call("GET", "/api/v1/cluster")).json;
    ids.set("b", record.nodeId);
    assert.equal(record.clusterId, clusterId);
    assert.equal(harness.tokenFilePresent(b), false, "the token file is deleted after the join");
    assert.equal(parseYaml(b.configText()).cluster.id, clusterId, "cluster.id written into controller.yml");
    const members = await eventually(async () => {
      const list = await membersOf(a);
      return list.length === 2 && list.every((m) => m.role === "voter" && m.gRPCAddr !== "") ? list : null;
    }, "two voters with addresses");
    const joined = members.find((m) => m.nodeId === ids.get("b"));
    assert.equal(joined.raftAddr, `127.0.0.1:${b.raftPort}`);
    assert.equal(joined.gRPCAddr, b.grpcAddr);
    assert.equal(joined.restAddr, `127.0.0.1:${b.httpPort}`);
    const tokens = (await a.call("GET", "/api/v1/cluster/join-tokens")).json.tokens;
    assert.equal(tokens.find((t: any) => t.label === "second").status, "USED");
    const audit = (await a.call("GET", "/api/v1/audit?pageSize=100")).json.data as any[];
    assert.ok(
      audit.some((r) => r.action === "cluster.member.joined" && r.resourceId === ids.get("b")),
      "the leader audits cluster.member.joined",
    );
  });

  it("a follower hands writes to the leader: a token issued on a follower lets a third controller join through the follower", async () => {
    const leader = (await a.call("GET", "/api/v1/cluster")).json.leaderId;
    const follower = leader === ids.get("a") ? b : a;
    const token = await harness.joinToken(follower, [follower], "third");
    c = await harness.start("c", { joinToken: token });
    ids.set("c", (await c.call("GET", "/api/v1/cluster")).json.nodeId);
    for (const member of [a, b, c]) {
      const list = await eventually(async () => {
        const members = await membersOf(member);
        return members.length === 3 && members.every((m) => m.role === "voter") ? members : null;
      }, `three voters seen by ${member.name}`);
      assert.deepEqual(list.map((m) => m.nodeId).sort(), [...ids.values()].sort());
      const record = (await member.call("GET", "/api/v1/cluster")).json;
      assert.equal(record.clusterId, clusterId);
      assert.equal(record.memberCount, 3);
    }
  });

  it("a used token cannot be used again, and a seed rotation invalidates an outstanding token; the token file stays", async () => {
    const outstanding = await harness.joinToken(c, [a, b, c], "before rotation");
    const rotation = await b.call("POST", "/api/v1/cluster/seed/rotate");
    assert.equal(rotation.status, 200, rotation.text);
    await eventually(
      async () =>
        ((await c.call("GET", "/api/v1/cluster/join-tokens")).json.tokens as any[]).find((t) => t.label === "before rotation")?.status === "INVALIDATED",
      "the token invalidated on every member",
    );
    await assert.rejects(harness.start("d", { joinToken: outstanding }), (err: Error) => {
      assert.match(err.message, /invalidated by a seed rotation/);
      return true;
    });
    const d = harness.members.find((m) => m.name === "d")!;
    assert.equal(harness.tokenFilePresent(d), true, "a refused join keeps the token file");
    assert.equal((await a.call("GET", "/api/v1/cluster")).json.memberCount, 3);
  });

  it("a join token for this cluster with another cluster.id in controller.yml is refused before joining; the token file stays", async () => {
    const token = await harness.joinToken(a, [a], "pinned elsewhere");
    const e = await harness.prepare("e");
    writeFileSync(e.tokenFile(), token);
    await assert.rejects(harness.launch(e, { cluster: { id: "another-cluster" } }), (err: Error) => {
      assert.match(err.message, new RegExp(`cluster\\.id is another-cluster but the join token in .* is for cluster ${clusterId}`));
      return true;
    });
    assert.equal(harness.tokenFilePresent(e), true);
    assert.equal((await a.call("GET", "/api/v1/cluster/join-tokens")).json.tokens.find((t: any) => t.label === "pinned elsewhere").status, "ACTIVE");
  });

  it("a member restarted after kill -9 keeps its identity and takes part in commits again; a token file of another cluster is refused", async () => {
    await harness.kill9(c);
    const foreign = signJoinToken({ jti: "x", cid: "foreign-cluster", addrs: ["127.0.0.1:1"], exp: Date.now() + 60_000, sg: 1, caf: "00" }, newSeedSecret());
    writeFileSync(c.tokenFile(), foreign);
    await assert.rejects(c.process!.restart(), (err: Error) => {
      assert.match(err.message, new RegExp(`member of cluster ${clusterId} but .* holds a join token of cluster foreign-cluster`));
      return true;
    });
    rmSync(c.tokenFile());
    await c.process!.restart().then((restarted) => (c.process = restarted));
    const record = (await c.call("GET", "/api/v1/cluster")).json;
    assert.equal(record.nodeId, ids.get("c"));
    assert.equal(record.clusterId, clusterId);
    const token = await harness.joinToken(c, [a], "after restart");
    assert.match(token, /^ccj_/);
  });

  it("eject removes a dead member; 404 MEMBER_NOT_FOUND for an unknown one", async () => {
    await harness.kill9(c);
    const survivor = a;
    const missing = await survivor.call("DELETE", "/api/v1/cluster/members/ctl-000000000000");
    assert.equal(missing.status, 404);
    assert.equal(missing.json.error.code, "MEMBER_NOT_FOUND");
    const ejected = await survivor.call("DELETE", `/api/v1/cluster/members/${ids.get("c")}?reason=${encodeURIComponent("host retired")}`);
    assert.equal(ejected.status, 200, ejected.text);
    assert.deepEqual(ejected.json, { nodeId: ids.get("c"), clusterId, reason: "host retired" });
    for (const member of [a, b]) {
      await eventually(async () => (await membersOf(member)).length === 2, `${member.name} sees two members`);
    }
    const audit = (await survivor.call("GET", "/api/v1/audit?pageSize=100")).json.data as any[];
    const record = audit.find((r) => r.action === "cluster.member.ejected" && r.resourceId === ids.get("c"));
    assert.equal(JSON.parse(record.details).reason, "host retired");
  });

  it("the leader leaves: leadership is handed off, it is removed, it shuts down, and refuses to start again", async () => {
    const leaderId = (await a.call("GET", "/api/v1/cluster")).json.leaderId as string;
    const leaving = leaderId === ids.get("a") ? a : b;
    const staying = leaving === a ? b : a;
    const left = await leaving.call("POST", "/api/v1/cluster/leave");
    assert.equal(left.status, 200, left.text);
    assert.deepEqual(left.json, { nodeId: leaderId, clusterId });
    await eventually(() => leaving.process!.output().includes("Controller stopped"), "the leaving controller stops by itself");
    const after = await eventually(async () => {
      const record = (await staying.call("GET", "/api/v1/cluster")).json;
      return record.memberCount === 1 && record.leaderId === record.nodeId ? record : null;
    }, "the staying controller leads alone");
    assert.equal(after.clusterId, clusterId);
    const previous = leaving.process!;
    await eventually(() => !isAlive(previous.pid), "the leaving controller's process exits", 30_000);
    await assert.rejects(
      previous.restart().then((unexpected) => {
        leaving.process = unexpected;
      }),
      (err: Error) => {
        assert.match(err.message, /This controller left cluster/);
        return true;
      },
    );
    assert.ok(
      (await staying.call("POST", "/api/v1/cluster/join-tokens", { joinAddrs: [staying.grpcAddr] })).status === 201,
      "the remaining member still commits",
    );
  });
});

// The cluster routes on a real controller (development profile, single-member Raft on an
// ephemeral port): every route's outcomes, bad input answered with the envelope and changing
// nothing, the audit records, and the identity across restarts and cluster.id pinning.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readJoinTokenClaims } from "../../src/cluster/identity/join-token.js";
import { startInProcessController, startTestController, type InProcessTestController } from "../support/controller.js";

interface Reply {
  status: number;
  json: any;
  text: string;
}

function client(url: string, token: string) {
  return async (method: string, path: string, body?: unknown, rawBody?: string): Promise<Reply> => {
    const headers: Record<string, string> = { authorization: `Bearer ${token}` };
    if (body !== undefined || rawBody !== undefined) headers["content-type"] = "application/json";
    const res = await fetch(url + path, { method, headers, body: rawBody ?? (body === undefined ? undefined : JSON.stringify(body)) });
    const text = await res.text();
    return { status: res.status, text, json: text ? JSON.parse(text) : undefined };
  };
}

function assertEnvelope(reply: Reply, status: number, code: string): void {
  assert.equal(reply.status, status, reply.text);
  assert.deepEqual(Object.keys(reply.json.error).sort(), ["code", "message", "status"]);
  assert.equal(reply.json.error.code, code, reply.text);
  assert.equal(reply.json.error.status, status);
}

async function auditActions(call: ReturnType<typeof client>): Promise<{ action: string; resourceId: string; details: string }[]> {
  const page = await call("GET", "/api/v1/audit?pageSize=100");
  assert.equal(page.status, 200, page.text);
  return page.json.data;
}

describe("cluster routes on a single-member controller", () => {
  let controller: InProcessTestController;
  let call: ReturnType<typeof client>;

  before(async () => {
    controller = await startInProcessController();
    call = client(controller.url, controller.adminToken);
  });
  after(async () => {
    await controller?.stop();
  });

  it("GET /cluster is the stamped cluster record with this controller leading", async () => {
    const reply = await call("GET", "/api/v1/cluster");
    assert.equal(reply.status, 200, reply.text);
    assert.match(reply.json.clusterId, /^[0-9a-f-]{36}$/);
    assert.equal(reply.json.memberCount, 1);
    assert.equal(reply.json.activeConfigVersion, null);
    assert.ok(Date.parse(reply.json.createdAt) <= Date.now());
    assert.match(reply.json.nodeId, /^ctl-[0-9a-f]{12}$/);
    assert.equal(reply.json.leaderId, reply.json.nodeId);
  });

  it("GET /cluster/members lists this controller with its Raft, REST and gRPC addresses", async () => {
    const cluster = (await call("GET", "/api/v1/cluster")).json;
    const httpPort = new URL(controller.url).port;
    const grpcPort = controller.controller.grpcPort;
    let member: any;
    for (let i = 0; i < 50; i++) {
      member = (await call("GET", "/api/v1/cluster/members")).json.members[0];
      if (member.restAddr !== "" && member.gRPCAddr !== "") break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.equal(member.nodeId, cluster.nodeId);
    assert.equal(member.restAddr, `127.0.0.1:${httpPort}`);
    assert.equal(member.gRPCAddr, `127.0.0.1:${grpcPort}`);
    assert.match(member.raftAddr, /^127\.0\.0\.1:\d+$/);
    assert.equal(member.role, "voter");
    assert.equal(member.leader, true);
    assert.equal(member.joinedAt, cluster.createdAt);
  });

  it("POST /cluster/join-tokens: 201 with the value once, carrying the join addresses; list and audit never hold it", async () => {
    const created = await call("POST", "/api/v1/cluster/join-tokens", { joinAddrs: ["10.0.0.1:9090", "[::1]:9090"], label: "second controller" });
    assert.equal(created.status, 201, created.text);
    assert.deepEqual(Object.keys(created.json).sort(), ["expiresAt", "jti", "token"]);
    const claims = readJoinTokenClaims(created.json.token)!;
    assert.deepEqual(claims.addrs, ["10.0.0.1:9090", "[::1]:9090"]);
    assert.equal(claims.cid, (await call("GET", "/api/v1/cluster")).json.clusterId);
    assert.equal(claims.jti, created.json.jti);

    const list = await call("GET", "/api/v1/cluster/join-tokens");
    assert.equal(list.status, 200);
    const item = list.json.tokens.find((t: any) => t.jti === created.json.jti);
    assert.deepEqual(Object.keys(item).sort(), ["createdAt", "expiresAt", "jti", "label", "status"]);
    assert.equal(item.status, "ACTIVE");
    assert.equal(item.label, "second controller");
    assert.equal(Date.parse(item.expiresAt) - Date.parse(item.createdAt), 86_400_000, "ttlSeconds defaults to 86400");
    assert.equal(list.text.includes(created.json.token), false);

    const issued = (await auditActions(call)).find((r) => r.action === "cluster.join_token.issued" && r.resourceId === created.json.jti);
    assert.ok(issued, "audited as cluster.join_token.issued");
    assert.equal(JSON.stringify(await auditActions(call)).includes(created.json.token), false);

    const longest = await call("POST", "/api/v1/cluster/join-tokens", { joinAddrs: ["ctl-1.internal:9090"], ttlSeconds: 30 * 86_400 });
    assert.equal(longest.status, 201, longest.text);
    assert.equal(readJoinTokenClaims(longest.json.token)!.exp, Date.parse(longest.json.expiresAt));
  });

  it("bad join-token requests: 400 MISSING_JOIN_ADDRS, 400 BAD_TTL, 422 naming the field; nothing is issued", async () => {
    const before = (await call("GET", "/api/v1/cluster/join-tokens")).json.tokens.length;
    for (const body of [{}, { joinAddrs: [] }, { joinAddrs: null }, { joinAddrs: "10.0.0.1:9090" }, { ttlSeconds: 60 }]) {
      assertEnvelope(await call("POST", "/api/v1/cluster/join-tokens", body), 400, "MISSING_JOIN_ADDRS");
    }
    for (const ttlSeconds of [0, -1, 30 * 86_400 + 1, 1.5, "60", null]) {
      assertEnvelope(await call("POST", "/api/v1/cluster/join-tokens", { joinAddrs: ["10.0.0.1:9090"], ttlSeconds }), 400, "BAD_TTL");
    }
    for (const [body, field] of [
      [{ joinAddrs: ["10.0.0.1"] }, "joinAddrs.0"],
      [{ joinAddrs: ["10.0.0.1:9090", "x:0"] }, "joinAddrs.1"],
      [{ joinAddrs: [42] }, "joinAddrs.0"],
      [{ joinAddrs: ["10.0.0.1:9090"], label: "x".repeat(129) }, "label"],
      [{ joinAddrs: ["10.0.0.1:9090"], secret: 1 }, "secret"],
    ] as const) {
      const reply = await call("POST", "/api/v1/cluster/join-tokens", body);
      assertEnvelope(reply, 422, "VALIDATION_ERROR");
      assert.ok(reply.json.error.message.startsWith(`${field}:`), reply.json.error.message);
    }
    assertEnvelope(await call("POST", "/api/v1/cluster/join-tokens", undefined, "{not json"), 400, "BAD_REQUEST");
    assert.equal((await call("GET", "/api/v1/cluster/join-tokens")).json.tokens.length, before);
  });

  it("DELETE /cluster/join-tokens/{jti}: 204 and REVOKED; unknown 404; a second revoke 409", async () => {
    const created = (await call("POST", "/api/v1/cluster/join-tokens", { joinAddrs: ["10.0.0.1:9090"] })).json;
    const revoked = await call("DELETE", `/api/v1/cluster/join-tokens/${created.jti}`);
    assert.equal(revoked.status, 204, revoked.text);
    assert.equal(revoked.text, "");
    const item = (await call("GET", "/api/v1/cluster/join-tokens")).json.tokens.find((t: any) => t.jti === created.jti);
    assert.equal(item.status, "REVOKED");
    assert.ok((await auditActions(call)).some((r) => r.action === "cluster.join_token.revoked" && r.resourceId === created.jti));
    assertEnvelope(await call("DELETE", `/api/v1/cluster/join-tokens/${created.jti}`), 409, "JOIN_TOKEN_NOT_ACTIVE");
    assertEnvelope(await call("DELETE", "/api/v1/cluster/join-tokens/no-such-token"), 404, "JOIN_TOKEN_NOT_FOUND");
  });

  it("POST /cluster/seed/rotate: the rotation record; every outstanding token becomes INVALIDATED", async () => {
    const outstanding = (await call("POST", "/api/v1/cluster/join-tokens", { joinAddrs: ["10.0.0.1:9090"] })).json;
    const rotation = await call("POST", "/api/v1/cluster/seed/rotate");
    assert.equal(rotation.status, 200, rotation.text);
    assert.deepEqual(Object.keys(rotation.json).sort(), ["clusterId", "rotatedAt", "rotatedBy"]);
    assert.equal(rotation.json.rotatedBy, "admin");
    assert.equal(rotation.json.clusterId, (await call("GET", "/api/v1/cluster")).json.clusterId);
    const tokens = (await call("GET", "/api/v1/cluster/join-tokens")).json.tokens;
    assert.equal(tokens.find((t: any) => t.jti === outstanding.jti).status, "INVALIDATED");
    assert.equal(tokens.filter((t: any) => t.status === "ACTIVE").length, 0);
    assert.ok((await auditActions(call)).some((r) => r.action === "cluster.seed.rotated" && r.resourceId === rotation.json.clusterId));
    assertEnvelope(await call("POST", "/api/v1/cluster/seed/rotate", { extra: true }), 422, "VALIDATION_ERROR");
  });

  it("DELETE /cluster/members/{nodeId}: 404 MEMBER_NOT_FOUND for an unknown id; a controller cannot eject itself", async () => {
    assertEnvelope(await call("DELETE", "/api/v1/cluster/members/ctl-000000000000?reason=gone"), 404, "MEMBER_NOT_FOUND");
    const self = (await call("GET", "/api/v1/cluster")).json.nodeId;
    assertEnvelope(await call("DELETE", `/api/v1/cluster/members/${self}`), 409, "CANNOT_EJECT_SELF");
    assert.equal((await call("GET", "/api/v1/cluster")).json.memberCount, 1);
  });

  it("POST /cluster/leave: the only member cannot leave (409 LAST_MEMBER) and keeps running", async () => {
    assertEnvelope(await call("POST", "/api/v1/cluster/leave"), 409, "LAST_MEMBER");
    assertEnvelope(await call("POST", "/api/v1/cluster/leave", { force: true }), 422, "VALIDATION_ERROR");
    assert.equal((await call("GET", "/api/v1/cluster")).status, 200);
    assert.equal(
      (await auditActions(call)).some((r) => r.action === "cluster.leave"),
      false,
    );
  });

  it("GET /cluster/leases and /cluster/config/versions answer their lists", async () => {
    const leases = await call("GET", "/api/v1/cluster/leases");
    assert.equal(leases.status, 200);
    assert.ok(Array.isArray(leases.json.leases));
    const versions = await call("GET", "/api/v1/cluster/config/versions");
    assert.equal(versions.status, 200);
    assert.deepEqual(versions.json, { activeVersion: null, versions: [] });
  });
});

describe("cluster identity across restarts and cluster.id pinning (controller child processes)", () => {
  const dirs: string[] = [];
  const tempDir = () => {
    const dir = mkdtempSync(join(tmpdir(), "cloud-cluster-id-"));
    dirs.push(dir);
    return dir;
  };
  after(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it("a restart (graceful or kill -9) keeps the cluster id and the member id; the pinned id starts, another refuses", async () => {
    const dataDir = tempDir();
    const first = await startTestController({}, { dataDir });
    const original = (await client(first.url, first.adminToken)("GET", "/api/v1/cluster")).json;
    await first.kill9();
    const second = await first.restart();
    const call = client(second.url, second.adminToken);
    const restarted = (await call("GET", "/api/v1/cluster")).json;
    assert.equal(restarted.clusterId, original.clusterId);
    assert.equal(restarted.nodeId, original.nodeId);
    assert.equal(restarted.createdAt, original.createdAt);
    assert.equal(restarted.leaderId, original.nodeId);
    await second.stop();

    const pinned = await startTestController({ cluster: { id: original.clusterId } }, { dataDir });
    assert.equal((await client(pinned.url, pinned.adminToken)("GET", "/api/v1/cluster")).json.clusterId, original.clusterId);
    await pinned.stop();

    await assert.rejects(startTestController({ cluster: { id: "another-cluster" } }, { dataDir, login: false }), (err: Error) => {
      assert.match(err.message, /exited with code 1/);
      assert.match(err.message, new RegExp(`cluster\\.id is another-cluster but this controller is a member of cluster ${original.clusterId}`));
      return true;
    });
  });

  it("a fresh controller with cluster.id set refuses to create a cluster", async () => {
    await assert.rejects(startTestController({ cluster: { id: "some-cluster" } }, { dataDir: tempDir(), login: false }), (err: Error) => {
      assert.match(err.message, /cluster\.id is some-cluster but this controller holds no cluster state/);
      return true;
    });
  });

  it("a controller whose Raft state is gone refuses a database that belongs to its old cluster", async () => {
    const dataDir = tempDir();
    const first = await startTestController({}, { dataDir });
    const clusterId = (await client(first.url, first.adminToken)("GET", "/api/v1/cluster")).json.clusterId;
    await first.stop();
    rmSync(join(dataDir, "raft"), { recursive: true, force: true });
    await assert.rejects(startTestController({}, { dataDir, login: false }), (err: Error) => {
      assert.match(err.message, new RegExp(`The database already belongs to cluster ${clusterId}; join it with a join token`));
      return true;
    });
  });
});

// The replicated cluster state: every command applied through entries with log indexes, as the
// Raft host applies them; time is only ever the leader's atMs in the command.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { ConfChange, ConfState } from "../../raft/types.js";
import { encodeCommand, encodeMembershipContext, type ClusterCommand, type MembershipContext } from "../../src/cluster/state/cluster-commands.js";
import { ClusterStateMachine } from "../../src/cluster/state/cluster-state-machine.js";

const conf = (voters: string[], learners: string[] = []): ConfState => ({ voters, learners, votersOutgoing: [], learnersNext: [], autoLeave: false });
const hash = (c: string) => c.repeat(64);

/** A state machine fed like the host feeds it: one entry per command, indexes counting up. */
class Feeder {
  readonly machine = new ClusterStateMachine();
  index = 0;
  apply(command: ClusterCommand): any {
    this.index += 1;
    return this.machine.apply({ index: this.index, term: 1, type: "normal", data: encodeCommand(command) });
  }
  applyRaw(text: string): any {
    this.index += 1;
    return this.machine.apply({ index: this.index, term: 1, type: "normal", data: new TextEncoder().encode(text) });
  }
  membership(changes: ConfChange["changes"], confState: ConfState, context?: MembershipContext): void {
    this.index += 1;
    this.machine.applyMembership({ changes, context: context ? encodeMembershipContext(context) : undefined }, confState);
  }
}

function stamped(): Feeder {
  const f = new Feeder();
  f.membership([{ type: "add-voter", nodeId: "ctl-a" }], conf(["ctl-a"]));
  const result = f.apply({
    op: "cluster.stamp",
    atMs: 1_000,
    clusterId: "c1",
    ca: { certPem: "CERT", keyPem: "KEY" },
    seedSecret: "s".repeat(43),
    member: { nodeId: "ctl-a", label: "first", raftAddr: "10.0.0.1:9190", restAddr: "10.0.0.1:8080", grpcAddr: "10.0.0.1:9090" },
  });
  assert.equal(result.ok, true);
  return f;
}

const issue = (f: Feeder, jti: string, atMs: number, over: Partial<Extract<ClusterCommand, { op: "token.issue" }>> = {}) =>
  f.apply({
    op: "token.issue",
    atMs,
    jti,
    label: "",
    hash: hash("a"),
    seedGeneration: 1,
    joinAddrs: ["10.0.0.1:9090"],
    createdAtMs: atMs,
    expiresAtMs: atMs + 60_000,
    by: "admin",
    ...over,
  });

describe("cluster state machine: stamp and readiness", () => {
  it("refuses every command but the stamp until the meta is stamped", () => {
    const f = new Feeder();
    const refused = f.apply({ op: "seed.rotate", atMs: 1, secret: "x".repeat(43), by: "admin" });
    assert.deepEqual(refused, { ok: false, code: "CLUSTER_NOT_READY", message: "the cluster meta is not stamped yet", index: 1 });
    assert.equal(f.machine.meta(), null);
  });

  it("stamps once: meta, CA, seed generation 1 and the first member's addresses", () => {
    const f = stamped();
    assert.deepEqual(f.machine.meta(), { clusterId: "c1", createdAtMs: 1_000 });
    assert.deepEqual(f.machine.material(), { caCertPem: "CERT", caKeyPem: "KEY" });
    assert.equal(f.machine.seed()?.generation, 1);
    assert.deepEqual(f.machine.members(), [
      { nodeId: "ctl-a", raftAddr: "10.0.0.1:9190", restAddr: "10.0.0.1:8080", grpcAddr: "10.0.0.1:9090", label: "first", joinedAtMs: 1_000, role: "voter" },
    ]);
    const again = f.apply({
      op: "cluster.stamp",
      atMs: 5,
      clusterId: "c1",
      ca: { certPem: "X", keyPem: "Y" },
      seedSecret: "t".repeat(43),
      member: { nodeId: "ctl-a", label: "", raftAddr: "", restAddr: "", grpcAddr: "" },
    });
    assert.equal(again.ok, true, "re-stamping the same cluster is a no-op");
    assert.deepEqual(f.machine.material(), { caCertPem: "CERT", caKeyPem: "KEY" });
    const other = f.apply({
      op: "cluster.stamp",
      atMs: 5,
      clusterId: "c2",
      ca: { certPem: "X", keyPem: "Y" },
      seedSecret: "t".repeat(43),
      member: { nodeId: "ctl-a", label: "", raftAddr: "", restAddr: "", grpcAddr: "" },
    });
    assert.equal(other.ok, false);
    assert.equal(f.machine.meta()?.clusterId, "c1");
  });

  it("answers INVALID_COMMAND for garbage and unknown commands without changing anything", () => {
    const f = stamped();
    const before = f.machine.snapshot();
    assert.equal(f.applyRaw("not json").ok, false);
    assert.equal(f.applyRaw(JSON.stringify({ op: "cluster.destroy", atMs: 1 })).code, "INVALID_COMMAND");
    assert.equal(f.applyRaw(JSON.stringify({ op: "lease.acquire", atMs: 1, name: "x", holder: "ctl-a", ttlMs: -5 })).code, "INVALID_COMMAND");
    assert.deepEqual(f.machine.snapshot(), before);
  });
});

describe("cluster state machine: join tokens and the seed", () => {
  it("issues, lists, consumes once, and lets the same member repeat its consume", () => {
    const f = stamped();
    assert.equal(issue(f, "t1", 2_000).ok, true);
    assert.equal(issue(f, "t1", 2_000).code, "JOIN_TOKEN_EXISTS");
    const token = f.machine.tokens()[0]!;
    assert.equal(token.status, "ACTIVE");
    assert.equal(token.hash, hash("a"));
    assert.equal(f.apply({ op: "token.consume", atMs: 3_000, jti: "t1", hash: hash("b"), nodeId: "ctl-b" }).code, "JOIN_TOKEN_NOT_FOUND", "wrong value");
    const used = f.apply({ op: "token.consume", atMs: 3_000, jti: "t1", hash: hash("a"), nodeId: "ctl-b" });
    assert.equal(used.ok, true);
    assert.equal(used.value.status, "USED");
    assert.equal(used.value.usedBy, "ctl-b");
    assert.equal(f.apply({ op: "token.consume", atMs: 3_500, jti: "t1", hash: hash("a"), nodeId: "ctl-b" }).ok, true, "a repeated join of the same member");
    assert.equal(f.apply({ op: "token.consume", atMs: 3_500, jti: "t1", hash: hash("a"), nodeId: "ctl-c" }).code, "JOIN_TOKEN_USED");
  });

  it("judges expiry with the leader's time in the consume command", () => {
    const f = stamped();
    issue(f, "t1", 2_000, { expiresAtMs: 5_000 });
    assert.equal(f.apply({ op: "token.consume", atMs: 5_000, jti: "t1", hash: hash("a"), nodeId: "ctl-b" }).code, "JOIN_TOKEN_EXPIRED");
    assert.equal(f.apply({ op: "token.consume", atMs: 4_999, jti: "t1", hash: hash("a"), nodeId: "ctl-b" }).ok, true);
  });

  it("revokes ACTIVE tokens only; a revoked token cannot be used", () => {
    const f = stamped();
    issue(f, "t1", 2_000);
    assert.equal(f.apply({ op: "token.revoke", atMs: 2_100, jti: "nope", by: "admin" }).code, "JOIN_TOKEN_NOT_FOUND");
    const revoked = f.apply({ op: "token.revoke", atMs: 2_100, jti: "t1", by: "admin" });
    assert.equal(revoked.value.status, "REVOKED");
    assert.equal(revoked.value.revokedAtMs, 2_100);
    assert.equal(f.apply({ op: "token.revoke", atMs: 2_200, jti: "t1", by: "admin" }).code, "JOIN_TOKEN_NOT_ACTIVE");
    assert.equal(f.apply({ op: "token.consume", atMs: 2_300, jti: "t1", hash: hash("a"), nodeId: "ctl-b" }).code, "JOIN_TOKEN_REVOKED");
  });

  it("rotating the seed invalidates every outstanding token and refuses tokens signed with the old seed", () => {
    const f = stamped();
    issue(f, "t1", 2_000);
    issue(f, "t2", 2_000);
    f.apply({ op: "token.consume", atMs: 2_500, jti: "t2", hash: hash("a"), nodeId: "ctl-b" });
    const rotated = f.apply({ op: "seed.rotate", atMs: 3_000, secret: "n".repeat(43), by: "admin" });
    assert.deepEqual(rotated.value, { secret: "n".repeat(43), generation: 2, rotatedAtMs: 3_000, rotatedBy: "admin" });
    assert.deepEqual(
      f.machine.tokens().map((t) => [t.jti, t.status]),
      [
        ["t1", "INVALIDATED"],
        ["t2", "USED"],
      ],
    );
    assert.equal(f.apply({ op: "token.consume", atMs: 3_100, jti: "t1", hash: hash("a"), nodeId: "ctl-c" }).code, "JOIN_TOKEN_INVALIDATED");
    assert.equal(issue(f, "t3", 3_200, { seedGeneration: 1 }).code, "SEED_ROTATED");
    assert.equal(issue(f, "t3", 3_200, { seedGeneration: 2 }).ok, true);
  });

  it("prunes tokens that stopped being ACTIVE a retention period after expiry", () => {
    const f = stamped();
    issue(f, "old", 2_000, { expiresAtMs: 3_000 });
    f.apply({ op: "token.revoke", atMs: 2_500, jti: "old", by: "admin" });
    issue(f, "new", 3_000 + 8 * 24 * 3600 * 1000);
    assert.deepEqual(
      f.machine.tokens().map((t) => t.jti),
      ["new"],
    );
  });
});

describe("cluster state machine: singleton leases", () => {
  it("grants with the log index as fencing token, renews for the holder, refuses others until expiry by the leader's time", () => {
    const f = stamped();
    const granted = f.apply({ op: "lease.acquire", atMs: 10_000, name: "audit-pruner", holder: "ctl-a", ttlMs: 3_600_000 });
    assert.equal(granted.ok, true);
    assert.equal(granted.value.fencingToken, granted.index);
    assert.equal(granted.value.expiresAtMs, 3_610_000);
    const held = f.apply({ op: "lease.acquire", atMs: 20_000, name: "audit-pruner", holder: "ctl-b", ttlMs: 3_600_000 });
    assert.equal(held.code, "LEASE_HELD");
    const again = f.apply({ op: "lease.acquire", atMs: 30_000, name: "audit-pruner", holder: "ctl-a", ttlMs: 3_600_000 });
    assert.equal(again.value.fencingToken, granted.index, "the holder's acquire renews: same token");
    assert.equal(again.value.expiresAtMs, 3_630_000);
    const taken = f.apply({ op: "lease.acquire", atMs: 3_630_000, name: "audit-pruner", holder: "ctl-b", ttlMs: 1_000 });
    assert.equal(taken.ok, true, "expired at the leader's time in the command");
    assert.equal(taken.value.holder, "ctl-b");
    assert.equal(taken.value.fencingToken, taken.index);
    assert.ok(taken.value.fencingToken > granted.value.fencingToken);
  });

  it("renew and release by a non-holder (or with an old token) are ClusterWriteConflict and change nothing", () => {
    const f = stamped();
    const granted = f.apply({ op: "lease.acquire", atMs: 1_000, name: "deployment-reconciler", holder: "ctl-a", ttlMs: 10_000 });
    const token = granted.value.fencingToken as number;
    const before = f.machine.snapshot();
    for (const command of [
      { op: "lease.renew", atMs: 2_000, name: "deployment-reconciler", holder: "ctl-b", fencingToken: token, ttlMs: 10_000 },
      { op: "lease.renew", atMs: 2_000, name: "deployment-reconciler", holder: "ctl-a", fencingToken: token + 100, ttlMs: 10_000 },
      { op: "lease.release", atMs: 2_000, name: "deployment-reconciler", holder: "ctl-b", fencingToken: token },
      { op: "lease.release", atMs: 2_000, name: "unknown-lease", holder: "ctl-a", fencingToken: token },
    ] as ClusterCommand[]) {
      const result = f.apply(command);
      assert.equal(result.code, "CLUSTER_WRITE_CONFLICT", JSON.stringify(command));
      assert.match(result.message, /^ClusterWriteConflict: /);
    }
    assert.deepEqual(f.machine.snapshot(), before);
    assert.equal(
      f.apply({ op: "lease.renew", atMs: 11_000, name: "deployment-reconciler", holder: "ctl-a", fencingToken: token, ttlMs: 10_000 }).code,
      "CLUSTER_WRITE_CONFLICT",
      "expired",
    );
    const renewed = f.apply({ op: "lease.renew", atMs: 5_000, name: "deployment-reconciler", holder: "ctl-a", fencingToken: token, ttlMs: 10_000 });
    assert.equal(renewed.value.expiresAtMs, 15_000);
    assert.equal(f.apply({ op: "lease.release", atMs: 6_000, name: "deployment-reconciler", holder: "ctl-a", fencingToken: token }).ok, true);
    assert.equal(f.machine.leases().length, 0);
  });
});

describe("cluster state machine: members and config versions", () => {
  it("follows the Raft configuration: joins as learner with addresses, promotion, ejection with its reason", () => {
    const f = stamped();
    f.membership([{ type: "add-learner", nodeId: "ctl-b" }], conf(["ctl-a"], ["ctl-b"]), {
      kind: "join",
      atMs: 7_000,
      member: { nodeId: "ctl-b", label: "second", raftAddr: "10.0.0.2:9190", restAddr: "10.0.0.2:8080", grpcAddr: "10.0.0.2:9090" },
    });
    assert.deepEqual(f.machine.member("ctl-b"), {
      nodeId: "ctl-b",
      label: "second",
      raftAddr: "10.0.0.2:9190",
      restAddr: "10.0.0.2:8080",
      grpcAddr: "10.0.0.2:9090",
      joinedAtMs: 7_000,
      role: "learner",
    });
    f.membership([{ type: "add-voter", nodeId: "ctl-b" }], conf(["ctl-a", "ctl-b"]), { kind: "promote", atMs: 8_000 });
    assert.equal(f.machine.member("ctl-b")?.role, "voter");
    assert.equal(f.machine.member("ctl-b")?.joinedAtMs, 7_000);
    f.membership([{ type: "remove-node", nodeId: "ctl-b" }], conf(["ctl-a"]), { kind: "eject", atMs: 9_000, reason: "disk died", by: "admin" });
    assert.equal(f.machine.member("ctl-b"), undefined);
    assert.deepEqual(f.machine.removedMembers(), [{ nodeId: "ctl-b", kind: "eject", reason: "disk died", by: "admin", removedAtMs: 9_000 }]);
  });

  it("updates a member's addresses; an unknown member is MEMBER_NOT_FOUND", () => {
    const f = stamped();
    assert.equal(f.apply({ op: "member.update", atMs: 1, nodeId: "ctl-z", restAddr: "x:1" }).code, "MEMBER_NOT_FOUND");
    const updated = f.apply({ op: "member.update", atMs: 1, nodeId: "ctl-a", restAddr: "10.0.0.9:8080" });
    assert.equal(updated.value.restAddr, "10.0.0.9:8080");
    assert.equal(updated.value.raftAddr, "10.0.0.1:9190");
  });

  it("keeps config versions in order with the active one", () => {
    const f = stamped();
    f.apply({ op: "config.put", atMs: 1, config: { a: 1 }, comment: "first", by: "admin" });
    f.apply({ op: "config.put", atMs: 2, config: { a: 2 }, comment: "second", by: "admin" });
    assert.equal(f.machine.activeConfigVersion(), 2);
    assert.equal(f.apply({ op: "config.activate", atMs: 3, version: 9, by: "admin" }).code, "CONFIG_VERSION_NOT_FOUND");
    assert.equal(f.apply({ op: "config.activate", atMs: 3, version: 1, by: "admin" }).ok, true);
    assert.equal(f.machine.activeConfigVersion(), 1);
    assert.deepEqual(
      f.machine.configVersions().map((v) => v.version),
      [1, 2],
    );
  });

  it("records each version's parent and refuses a put or an activation made against another active version", () => {
    const f = stamped();
    assert.equal(f.apply({ op: "config.put", atMs: 1, config: { a: 1 }, comment: "", by: "admin", parentVersion: null }).ok, true);
    assert.equal(f.apply({ op: "config.put", atMs: 2, config: { a: 2 }, comment: "", by: "admin", parentVersion: 1 }).ok, true);
    const stalePut = f.apply({ op: "config.put", atMs: 3, config: { a: 3 }, comment: "", by: "admin", parentVersion: 1 });
    assert.equal(stalePut.code, "CLUSTER_WRITE_CONFLICT");
    const staleActivate = f.apply({ op: "config.activate", atMs: 3, version: 1, by: "admin", expectedActive: null });
    assert.equal(staleActivate.code, "CLUSTER_WRITE_CONFLICT");
    assert.equal(f.machine.activeConfigVersion(), 2, "the refusals changed nothing");
    assert.deepEqual(
      f.machine.configVersions().map((v) => [v.version, v.parentVersion]),
      [
        [1, null],
        [2, 1],
      ],
    );
    assert.equal(f.apply({ op: "config.activate", atMs: 4, version: 1, by: "admin", expectedActive: 2 }).ok, true);
    assert.equal(f.machine.activeConfigVersion(), 1);
  });
});

describe("cluster state machine: determinism, snapshot and restore", () => {
  it("two machines fed the same entries are equal, and a restored snapshot continues identically", () => {
    const script = (f: Feeder) => {
      issue(f, "t1", 2_000);
      f.apply({ op: "lease.acquire", atMs: 2_100, name: "audit-pruner", holder: "ctl-a", ttlMs: 1_000 });
      f.apply({ op: "seed.rotate", atMs: 2_200, secret: "r".repeat(43), by: "admin" });
      f.apply({ op: "config.put", atMs: 2_300, config: { x: true }, comment: "", by: "admin" });
    };
    const a = stamped();
    const b = stamped();
    script(a);
    script(b);
    assert.deepEqual(a.machine.snapshot(), b.machine.snapshot());

    const restored = new Feeder();
    restored.index = a.index;
    let notified = 0;
    restored.machine.onChange(() => notified++);
    restored.machine.restore(a.machine.snapshot());
    assert.equal(notified, 1);
    assert.deepEqual(restored.machine.snapshot(), a.machine.snapshot());
    const next = (f: Feeder) => f.apply({ op: "lease.acquire", atMs: 3_200, name: "audit-pruner", holder: "ctl-b", ttlMs: 1_000 });
    assert.deepEqual(next(restored), next(a));
    assert.deepEqual(restored.machine.snapshot(), a.machine.snapshot());

    const empty = new ClusterStateMachine();
    empty.restore(new Uint8Array(0));
    assert.equal(empty.meta(), null);
  });
});

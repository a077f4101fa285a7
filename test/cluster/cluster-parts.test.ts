// The cluster service's parts on their own, over fake state and a fake Raft member: the read
// views, join token administration (seed rotation retry, refusals), writes through the leader
// (NOT_LEADER, closed, retry bound, unknown outcomes), the choice of a leadership transferee and
// the member record update. The service over a real Raft member is cluster-service.test.ts.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createClusterCa } from "../../src/cluster/identity/ca.js";
import type { AppliedCommand, UnstampedCommand } from "../../src/cluster/state/cluster-commands.js";
import { addressUpdate } from "../../src/cluster/membership/cluster-upkeep.js";
import type { JoinTokenRecord, LeaseRecord, MemberRecord, SeedState } from "../../src/cluster/state/cluster-state-machine.js";
import {
  clusterRecordView,
  configVersionListView,
  joinTokenListView,
  leaseListView,
  memberListView,
  type ClusterStateReader,
} from "../../src/cluster/state/cluster-views.js";
import { HostErrorCode, RaftHostError } from "../../src/cluster/raft-host/host-errors.js";
import { JoinTokenAdmin } from "../../src/cluster/state/join-token-admin.js";
import { readJoinTokenClaims, verifyJoinToken } from "../../src/cluster/identity/join-token.js";
import { LeaderWrites } from "../../src/cluster/membership/leader-writes.js";
import { mostCaughtUpVoter } from "../../src/cluster/membership/member-removal.js";
import type { LeaderLink } from "../../src/cluster/peers/membership-types.js";
import type { RaftMember } from "../../src/cluster/membership/raft-member.js";
import { FakeClock } from "../support/fake-clock.js";
import { ApiError } from "../../src/shared/errors.js";

const member = (nodeId: string, role: "voter" | "learner" = "voter"): MemberRecord => ({
  nodeId,
  raftAddr: `${nodeId}:7000`,
  restAddr: `${nodeId}:8080`,
  grpcAddr: `${nodeId}:9090`,
  label: "",
  joinedAtMs: 1_000,
  role,
});

const token = (jti: string, status: JoinTokenRecord["status"], expiresAtMs: number): JoinTokenRecord => ({
  jti,
  label: "",
  hash: "h",
  seedGeneration: 1,
  joinAddrs: [],
  createdAtMs: 0,
  expiresAtMs,
  createdBy: "admin",
  status,
  usedAtMs: null,
  usedBy: null,
  revokedAtMs: null,
});

function fakeState(parts: Partial<{ members: MemberRecord[]; tokens: JoinTokenRecord[]; leases: LeaseRecord[] }> = {}): ClusterStateReader {
  return {
    members: () => parts.members ?? [],
    tokens: () => parts.tokens ?? [],
    leases: () => parts.leases ?? [],
    configVersions: () => [
      { version: 1, config: { a: 1 }, comment: "first", createdAtMs: 0, createdBy: "admin" },
      { version: 2, config: { a: 2 }, comment: "", createdAtMs: 60_000, createdBy: "ops" },
    ],
    activeConfigVersion: () => 2,
  };
}

async function apiError(promise: Promise<unknown>): Promise<ApiError> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof ApiError, `an ApiError, got ${String(err)}`);
    return err;
  }
  assert.fail("expected an ApiError");
}

describe("cluster parts: read views", () => {
  it("cluster and member views mark the leader and count the members", () => {
    const state = fakeState({ members: [member("c1"), member("c2"), member("c3", "learner")] });
    assert.deepEqual(clusterRecordView({ clusterId: "cl-1", createdAtMs: 0 }, state, "c2", "c1"), {
      clusterId: "cl-1",
      memberCount: 3,
      activeConfigVersion: 2,
      createdAt: "1970-01-01T00:00:00.000Z",
      nodeId: "c2",
      leaderId: "c1",
    });
    const { members } = memberListView(state, "c1");
    assert.deepEqual(
      members.map((m) => [m.nodeId, m.leader, m.role, m.gRPCAddr]),
      [
        ["c1", true, "voter", "c1:9090"],
        ["c2", false, "voter", "c2:9090"],
        ["c3", false, "learner", "c3:9090"],
      ],
    );
    assert.equal(
      memberListView(state, null).members.some((m) => m.leader),
      false,
    );
  });

  it("an ACTIVE token past its expiry is listed EXPIRED; expired leases are left out", () => {
    const state = fakeState({
      tokens: [token("a", "ACTIVE", 5_000), token("b", "ACTIVE", 15_000), token("c", "USED", 5_000)],
      leases: [
        { name: "audit-pruner", holder: "c1", fencingToken: 7, grantedAtMs: 0, expiresAtMs: 10_001 },
        { name: "reconciler", holder: "c2", fencingToken: 9, grantedAtMs: 0, expiresAtMs: 10_000 },
      ],
    });
    assert.deepEqual(
      joinTokenListView(state, 10_000).tokens.map((t) => [t.jti, t.status]),
      [
        ["a", "EXPIRED"],
        ["b", "ACTIVE"],
        ["c", "USED"],
      ],
    );
    assert.deepEqual(
      leaseListView(state, 10_000).leases.map((l) => l.name),
      ["audit-pruner"],
      "a lease expiring now is not held",
    );
  });

  it("config versions mark the active one", () => {
    const list = configVersionListView(fakeState());
    assert.equal(list.activeVersion, 2);
    assert.deepEqual(
      list.versions.map((v) => [v.version, v.active, v.createdAt]),
      [
        [1, false, "1970-01-01T00:00:00.000Z"],
        [2, true, "1970-01-01T00:01:00.000Z"],
      ],
    );
  });
});

describe("cluster parts: join token administration", () => {
  const ca = createClusterCa();
  const material = { caCertPem: ca.certPem, caKeyPem: ca.keyPem };

  function admin(results: AppliedCommand[], seeds: SeedState[]) {
    const commits: UnstampedCommand[] = [];
    const waited: number[] = [];
    let seedReads = 0;
    const tokens = [token("known", "ACTIVE", 10)];
    const tokenAdmin = new JoinTokenAdmin({
      state: { seed: () => seeds[Math.min(seedReads++, seeds.length - 1)]!, material: () => material, tokens: () => tokens },
      clock: new FakeClock(1_000_000),
      clusterId: () => "cl-1",
      commit: async <T>(command: UnstampedCommand) => {
        commits.push(command);
        return results.shift()! as AppliedCommand<T>;
      },
      waitApplied: async (index) => void waited.push(index),
    });
    return { tokenAdmin, commits, waited };
  }

  it("signs with the current seed, records only the hash, and answers the value once", async () => {
    const seed = { generation: 4, secret: "s".repeat(43), rotatedAtMs: 0, rotatedBy: "" } as SeedState;
    const { tokenAdmin, commits } = admin([{ ok: true, value: {}, index: 10 }], [seed]);
    const created = await tokenAdmin.issue({ joinAddrs: ["10.0.0.1:9090"], ttlSeconds: 60, label: "rack-2" }, "admin");
    assert.equal(created.expiresAt, new Date(1_000_000 + 60_000).toISOString());
    const claims = readJoinTokenClaims(created.token)!;
    assert.deepEqual([claims.cid, claims.sg, claims.addrs, claims.jti], ["cl-1", 4, ["10.0.0.1:9090"], created.jti]);
    assert.ok(verifyJoinToken(created.token, seed.secret), "signed with the seed");
    assert.equal(commits.length, 1);
    const command = commits[0] as Extract<UnstampedCommand, { op: "token.issue" }>;
    assert.equal(command.op, "token.issue");
    assert.equal(command.label, "rack-2");
    assert.notEqual(command.hash, created.token);
    assert.equal(JSON.stringify(command).includes(created.token), false, "the value itself is not committed");
  });

  it("a seed rotated in between: signed again once with the new seed; twice is a refusal", async () => {
    const oldSeed = { generation: 1, secret: "a".repeat(43), rotatedAtMs: 0, rotatedBy: "" } as SeedState;
    const newSeed = { generation: 2, secret: "b".repeat(43), rotatedAtMs: 0, rotatedBy: "" } as SeedState;
    const rotated: AppliedCommand = { ok: false, code: "SEED_ROTATED", message: "the seed rotated", index: 41 };
    const retried = admin([rotated, { ok: true, value: {}, index: 42 }], [oldSeed, newSeed]);
    const created = await retried.tokenAdmin.issue({ joinAddrs: ["10.0.0.1:9090"] }, "admin");
    assert.deepEqual(retried.waited, [41], "waits for the rotation to apply before signing again");
    assert.equal(retried.commits.length, 2);
    assert.ok(verifyJoinToken(created.token, newSeed.secret), "signed with the new seed");
    assert.equal(verifyJoinToken(created.token, oldSeed.secret), null, "not with the old one");

    const twice = admin([rotated, { ...rotated, index: 43 }], [oldSeed, newSeed]);
    const error = await apiError(twice.tokenAdmin.issue({ joinAddrs: ["10.0.0.1:9090"] }, "admin"));
    assert.deepEqual([error.status, error.code], [409, "SEED_ROTATED"]);
  });

  it("revoking an unknown token is 404 JOIN_TOKEN_NOT_FOUND without a commit", async () => {
    const { tokenAdmin, commits } = admin([], []);
    const error = await apiError(tokenAdmin.revoke("nope", "admin"));
    assert.deepEqual([error.status, error.code], [404, "JOIN_TOKEN_NOT_FOUND"]);
    assert.equal(commits.length, 0);
  });
});

describe("cluster parts: writes through the leader", () => {
  // The retry waits are unref'd timers (they must not keep a stopping controller alive); here
  // nothing else holds the event loop open while a write retries.
  let keepAlive: NodeJS.Timeout;
  before(() => void (keepAlive = setInterval(() => undefined, 1_000)));
  after(() => clearInterval(keepAlive));

  /** A Raft member whose leadership the test sets; proposals answer with `propose`. */
  function fakeMember(host: { leader: string | null; self: string; propose?: (data: Uint8Array) => Promise<unknown> }): RaftMember {
    return {
      host: {
        leaderId: () => host.leader,
        isLeader: () => host.leader === host.self,
        propose: host.propose ?? (async () => ({ ok: true, value: null, index: 5 })),
        proposeConfChange: async () => undefined,
        applied: () => 5,
      },
    } as unknown as RaftMember;
  }

  function writes(member: RaftMember, options: { link?: LeaderLink | null; closed?: string | null; commitTimeoutMs?: number } = {}) {
    return new LeaderWrites({
      member: () => member,
      leaderLink: () => options.link ?? null,
      closedReason: () => options.closed ?? null,
      isStopped: () => false,
      clock: new FakeClock(7_000),
      tuning: { commitTimeoutMs: options.commitTimeoutMs ?? 200, tickIntervalMs: 5 },
    });
  }

  it("on the leader: the proposal is stamped with the leader's clock", async () => {
    let proposed: Uint8Array | null = null;
    const m = fakeMember({
      leader: "c1",
      self: "c1",
      propose: async (data) => {
        proposed = data;
        return { ok: true, value: "v", index: 5 };
      },
    });
    const result = await writes(m).commit({ op: "seed.rotate", secret: "x", by: "admin" } as UnstampedCommand);
    assert.deepEqual(result, { ok: true, value: "v", index: 5 });
    assert.ok(proposed !== null, "a proposal was made");
    assert.match(new TextDecoder().decode(proposed), /7000/, "atMs from the clock");
  });

  it("not leading: relayed writes are 409 NOT_LEADER; others go over the link to the leader", async () => {
    const m = fakeMember({ leader: "c2", self: "c1" });
    const error = await apiError(writes(m).commitOnLeader({ op: "seed.rotate", secret: "x", by: "a" } as UnstampedCommand));
    assert.deepEqual([error.status, error.code], [409, "NOT_LEADER"]);
    assert.match(error.message, /the leader is c2/);
    const asked: string[] = [];
    const link: LeaderLink = {
      propose: async (leaderId) => {
        asked.push(leaderId);
        return { ok: true, value: null, index: 5 };
      },
      changeMembership: async () => undefined,
    };
    await writes(m, { link }).commit({ op: "seed.rotate", secret: "x", by: "a" } as UnstampedCommand);
    assert.deepEqual(asked, ["c2"]);
  });

  it("closed: 503 at once; no leader reachable: 503 once the bound passed, naming the last problem", async () => {
    const leading = fakeMember({ leader: "c1", self: "c1" });
    const closed = await apiError(
      writes(leading, { closed: "this controller is stopping" }).commit({ op: "seed.rotate", secret: "x", by: "a" } as UnstampedCommand),
    );
    assert.deepEqual([closed.status, closed.code], [503, "RAFT_UNAVAILABLE"]);
    assert.match(closed.message, /stopping/);

    const unreachable = fakeMember({ leader: "c2", self: "c1" });
    const started = performance.now();
    const timedOut = await apiError(writes(unreachable, { commitTimeoutMs: 60 }).commit({ op: "seed.rotate", secret: "x", by: "a" } as UnstampedCommand));
    assert.ok(performance.now() - started >= 60, "retried until the bound");
    assert.deepEqual([timedOut.status, timedOut.code], [503, "RAFT_UNAVAILABLE"]);
    assert.match(timedOut.message, /the leader is c2, which this controller cannot reach/);
  });

  it("a dropped proposal is retried; an outcome not known is 503 at once", async () => {
    let attempts = 0;
    const flaky = fakeMember({
      leader: "c1",
      self: "c1",
      propose: async () => {
        attempts += 1;
        if (attempts === 1) throw new RaftHostError(HostErrorCode.ProposalDropped, "dropped");
        return { ok: true, value: null, index: 5 };
      },
    });
    await writes(flaky).commit({ op: "seed.rotate", secret: "x", by: "a" } as UnstampedCommand);
    assert.equal(attempts, 2);

    attempts = 0;
    const lost = fakeMember({
      leader: "c1",
      self: "c1",
      propose: async () => {
        attempts += 1;
        throw new RaftHostError(HostErrorCode.LeadershipLost, "leadership lost");
      },
    });
    const error = await apiError(writes(lost).commit({ op: "seed.rotate", secret: "x", by: "a" } as UnstampedCommand));
    assert.deepEqual([error.status, error.code, attempts], [503, "RAFT_UNAVAILABLE", 1], "not retried: it may still apply");
  });
});

describe("cluster parts: leaving and upkeep helpers", () => {
  it("the transferee is the voter whose log matches furthest", () => {
    assert.equal(mostCaughtUpVoter(["c2", "c3"], { c2: { match: 10 }, c3: { match: 12 } }), "c3");
    assert.equal(mostCaughtUpVoter(["c2", "c3"], { c2: { match: 12 } }), "c2", "unknown progress counts as 0");
    assert.equal(mostCaughtUpVoter(["c2", "c3"], {}), "c2", "a tie keeps the order given");
  });

  it("the member record update holds only known addresses that changed", () => {
    const record = { raftAddr: "h:7000", restAddr: "", grpcAddr: "h:9090" };
    assert.equal(addressUpdate({ raftAddr: "h:7000", restAddr: "", grpcAddr: "" }, record), null);
    assert.deepEqual(addressUpdate({ raftAddr: "h:7000", restAddr: "h:8080", grpcAddr: "h:9091" }, record), { restAddr: "h:8080", grpcAddr: "h:9091" });
  });
});

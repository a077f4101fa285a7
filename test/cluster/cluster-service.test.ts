// The cluster service over a real single-member Raft (LevelDB log, mutual-TLS transport on an
// ephemeral port) and the embedded document store: the CA shared with the daemon gateway,
// singleton leases with the leader's clock, CLUSTER_NOT_READY before the stamp and
// RAFT_UNAVAILABLE once no quorum can commit.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AuditService } from "../../src/audit/audit-service.js";
import { createClusterCa } from "../../src/cluster/identity/ca.js";
import { ClusterDocuments } from "../../src/cluster/identity/cluster-documents.js";
import { ClusterIdentityStore } from "../../src/cluster/identity/cluster-identity.js";
import { ClusterService, type HeldLease } from "../../src/cluster/cluster-service.js";
import { ClusterStateMachine } from "../../src/cluster/state/cluster-state-machine.js";
import { MemberClients } from "../../src/cluster/peers/member-clients.js";
import { RaftMember, raftTuningDefaults, type RaftTuning } from "../../src/cluster/membership/raft-member.js";
import { startClusterService } from "../../src/cluster/start-cluster.js";
import { issueNodeCertificate } from "../../src/cluster/identity/ca.js";
import { parseControllerConfig } from "../../src/config/load.js";
import { createLogService } from "../../src/logs/logger.js";
import type { Clock } from "../../src/shared/clock.js";
import { FakeClock } from "../support/fake-clock.js";
import { ApiError } from "../../src/shared/errors.js";
import { CLUSTER_CA_COLLECTION, CLUSTER_CA_DOCUMENT_ID } from "../../src/cluster/identity/ca.js";
import { openDocumentStore } from "../../src/store/open.js";
import type { DocumentStore } from "../../src/store/ports.js";

const fastTuning: Partial<RaftTuning> = { tickIntervalMs: 20, electionTicks: 10, heartbeatTicks: 1, commitTimeoutMs: 800 };
const dirs: string[] = [];
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

interface Harness {
  dir: string;
  documents: DocumentStore;
  cluster: ClusterService;
  logLines: string[];
  stop(): Promise<void>;
}

async function startHarness(options: { dir?: string; clock?: Clock; beforeStart?: (documents: DocumentStore) => Promise<void> } = {}): Promise<Harness> {
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), "cloud-cluster-service-"));
  if (!options.dir) dirs.push(dir);
  const clock = options.clock ?? new FakeClock(Date.now());
  const documents = await openDocumentStore({ profile: "development", dataDir: dir, clock, ttlSweepIntervalMs: 0 });
  await options.beforeStart?.(documents);
  const logLines: string[] = [];
  const logs = createLogService({ level: "INFO", format: "JSON", clock }, { write: (chunk: string) => logLines.push(chunk) });
  const config = parseControllerConfig({ data: { dir }, raft: { host: "127.0.0.1", port: 0, dataDir: join(dir, "raft") } }, { env: {} });
  const { cluster: clusterConfig, raft, data, http, grpc } = config;
  const cluster = await startClusterService({
    cluster: clusterConfig,
    raft,
    data,
    http,
    grpc,
    documents,
    audit: new AuditService({ documents, clock }),
    clock,
    logs,
    onLeft: () => undefined,
    tuning: fastTuning,
  });
  return {
    dir,
    documents,
    cluster,
    logLines,
    async stop() {
      await cluster.stop();
      await documents.close();
    },
  };
}

async function rejectsWith(promise: Promise<unknown>, status: number, code: string): Promise<void> {
  await assert.rejects(promise, (err: unknown) => {
    assert.ok(err instanceof ApiError, String(err));
    assert.equal(err.status, status, err.message);
    assert.equal(err.code, code, err.message);
    return true;
  });
}

describe("cluster service: the cluster CA", () => {
  it("a first start adopts the CA already in cluster_ca; the Raft-held CA is written back after a change", async () => {
    const existing = createClusterCa();
    const h = await startHarness({
      beforeStart: async (documents) => {
        await documents.collection(CLUSTER_CA_COLLECTION).insert({ _id: CLUSTER_CA_DOCUMENT_ID, ...existing, createdAt: new Date().toISOString() });
      },
    });
    const docs = new ClusterDocuments(h.documents);
    assert.deepEqual(await docs.readGatewayCa(), existing);
    assert.deepEqual(h.cluster.material(), { caCertPem: existing.certPem, caKeyPem: existing.keyPem });
    assert.equal(await docs.clusterIdOfStore(), h.cluster.clusterId);
    const clusterId = h.cluster.clusterId;
    await h.stop();

    const documents = await openDocumentStore({ profile: "development", dataDir: h.dir, ttlSweepIntervalMs: 0 });
    await documents.collection(CLUSTER_CA_COLLECTION).put({ _id: CLUSTER_CA_DOCUMENT_ID, ...createClusterCa(), createdAt: new Date().toISOString() });
    await documents.close();

    const restarted = await startHarness({ dir: h.dir });
    assert.equal(restarted.cluster.clusterId, clusterId);
    assert.deepEqual(await new ClusterDocuments(restarted.documents).readGatewayCa(), existing, "the Raft-held CA wins");
    assert.ok(restarted.logLines.some((line) => line.includes("held another CA")));
    await restarted.stop();
  });

  it("a first start without a CA document mints one and writes it for the gateway", async () => {
    const h = await startHarness();
    const ca = await new ClusterDocuments(h.documents).readGatewayCa();
    assert.ok(ca?.certPem.includes("BEGIN CERTIFICATE"));
    assert.ok(ca?.keyPem.includes("PRIVATE KEY"));
    await h.stop();
  });
});

describe("cluster service: singleton leases", () => {
  it("runUnderLease grants through Raft with the log index as fencing token, skips while another holds it, re-grants after expiry by the leader's clock", async () => {
    const clock = new FakeClock(Date.now());
    const h = await startHarness({ clock });
    let seen: HeldLease | null = null;
    assert.equal(
      await h.cluster.runUnderLease("audit-pruner", 3_600_000, (lease) => {
        seen = lease;
      }),
      true,
    );
    const first = seen as unknown as HeldLease;
    assert.equal(first.name, "audit-pruner");
    assert.ok(first.fencingToken > 0);
    assert.equal(first.signal.aborted, false);
    const listed = h.cluster.leases().leases;
    assert.deepEqual(
      listed.map((l) => [l.name, l.holder, l.fencingToken]),
      [["audit-pruner", h.cluster.nodeId, first.fencingToken]],
    );

    assert.equal(await h.cluster.runUnderLease("audit-pruner", 3_600_000, () => undefined), true, "the holder runs again");
    assert.equal(h.cluster.leases().leases[0]!.fencingToken, first.fencingToken, "a renewal keeps the token");

    const taken = await h.cluster.commit<any>({ op: "lease.acquire", name: "deployment-reconciler", holder: "ctl-other", ttlMs: 10_000 });
    assert.equal(taken.ok, true);
    let ran = false;
    assert.equal(
      await h.cluster.runUnderLease("deployment-reconciler", 10_000, () => {
        ran = true;
      }),
      false,
    );
    assert.equal(ran, false, "skipped while another controller holds the lease");

    const conflict = await h.cluster.commit<any>({
      op: "lease.release",
      name: "deployment-reconciler",
      holder: h.cluster.nodeId,
      fencingToken: taken.ok ? taken.value.fencingToken : 0,
    });
    assert.equal(conflict.ok, false);
    assert.equal(conflict.ok ? "" : conflict.code, "CLUSTER_WRITE_CONFLICT");

    clock.advance(10_000);
    let grantedToken = 0;
    assert.equal(
      await h.cluster.runUnderLease("deployment-reconciler", 10_000, (lease) => {
        grantedToken = lease.fencingToken;
      }),
      true,
    );
    assert.ok(taken.ok && grantedToken > taken.value.fencingToken, "a new grant has a higher fencing token");
    await h.stop();
  });

  it("a job loses its lease (signal aborted) when a renewal is refused", async () => {
    const clock = new FakeClock(Date.now());
    const h = await startHarness({ clock });
    const ttlMs = 150;
    const finished = h.cluster.runUnderLease("audit-pruner", ttlMs, async (lease) => {
      clock.advance(ttlMs);
      const stolen = await h.cluster.commit<any>({ op: "lease.acquire", name: "audit-pruner", holder: "ctl-other", ttlMs: 60_000 });
      assert.equal(stolen.ok, true);
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error("the lease was not reported lost")), 5_000);
        lease.signal.addEventListener("abort", () => {
          clearTimeout(timer);
          resolve();
        });
      });
    });
    assert.equal(await finished, true);
    await h.stop();
  });

  it("confirm renews through Raft while held, and rejects (aborting the job) once another controller was granted the lease", async () => {
    const clock = new FakeClock(Date.now());
    const h = await startHarness({ clock });
    const ttlMs = 60_000;
    const finished = h.cluster.runUnderLease("deployment-reconciler", ttlMs, async (lease) => {
      clock.advance(ttlMs - 1);
      await lease.confirm();
      clock.advance(ttlMs - 1);
      const refused = await h.cluster.commit<any>({ op: "lease.acquire", name: "deployment-reconciler", holder: "ctl-other", ttlMs });
      assert.equal(refused.ok, false, "a confirmed lease runs a whole TTL from the confirmation");
      clock.advance(2);
      const stolen = await h.cluster.commit<any>({ op: "lease.acquire", name: "deployment-reconciler", holder: "ctl-other", ttlMs });
      assert.equal(stolen.ok, true);
      await assert.rejects(lease.confirm(), /no longer held here/);
      assert.equal(lease.signal.aborted, true);
      await assert.rejects(lease.confirm(), /no longer held here/, "and keeps rejecting");
    });
    assert.equal(await finished, true);
    await h.stop();
  });

  it("after stop, writes answer 503 RAFT_UNAVAILABLE and runUnderLease skips", async () => {
    const h = await startHarness();
    await h.stop();
    assert.equal(await h.cluster.runUnderLease("audit-pruner", 1000, () => undefined), false);
    await rejectsWith(h.cluster.rotateSeed("admin"), 503, "RAFT_UNAVAILABLE");
  });
});

describe("cluster service: readiness and quorum", () => {
  it("without a quorum: reads still answer, writes fail with 503 RAFT_UNAVAILABLE within the bound, leases are skipped", async () => {
    const h = await startHarness();
    // A second voter that never answers: the configuration {self, ghost} has no quorum.
    await h.cluster.changeMembership({ changes: [{ type: "add-voter", nodeId: "ctl-ghost" }], context: { kind: "promote" } });
    const started = Date.now();
    await rejectsWith(h.cluster.issueJoinToken({ joinAddrs: ["127.0.0.1:9090"] }, "admin"), 503, "RAFT_UNAVAILABLE");
    assert.ok(Date.now() - started < 5_000, "bounded by commitTimeoutMs");
    assert.equal(await h.cluster.runUnderLease("audit-pruner", 1000, () => undefined), false);
    assert.equal(h.cluster.cluster().memberCount, 2);
    assert.deepEqual(
      h.cluster
        .members()
        .members.map((m) => m.nodeId)
        .sort(),
      [h.cluster.nodeId, "ctl-ghost"].sort(),
    );
    await h.stop();
  });

  it("before the cluster meta is stamped every route answers 409 CLUSTER_NOT_READY", async () => {
    const dir = mkdtempSync(join(tmpdir(), "cloud-cluster-unstamped-"));
    dirs.push(dir);
    const clock = new FakeClock(Date.now());
    const identityStore = new ClusterIdentityStore(join(dir, "raft"));
    const nodeId = identityStore.ensureNodeId();
    const ca = createClusterCa();
    const tls = { caPem: ca.certPem, ...issueNodeCertificate(ca, { nodeId }) };
    const machine = new ClusterStateMachine();
    const logs = createLogService({ level: "ERROR", format: "JSON", clock }, { write: () => undefined });
    const tuning = { ...raftTuningDefaults, ...fastTuning };
    // Bootstrapped with a voter that never answers: no leader, so the stamp never commits.
    const member = await RaftMember.start({
      nodeId,
      clusterId: "c",
      logDir: identityStore.logDir,
      tls,
      port: 0,
      machine,
      bootstrapVoters: [nodeId, "ctl-ghost"],
      tuning,
      logger: logs.logger("t"),
    });
    const documents = await openDocumentStore({ profile: "development", dataDir: dir, clock, ttlSweepIntervalMs: 0 });
    const cluster = new ClusterService({
      nodeId,
      identity: { clusterId: "c", nodeId, state: "member" },
      identityStore,
      machine,
      member,
      restartMember: () => Promise.reject(new Error("not restarted in this test")),
      clients: new MemberClients(tls),
      documents: new ClusterDocuments(documents),
      audit: new AuditService({ documents, clock }),
      clock,
      logger: logs.logger("t"),
      tuning,
      advertisedHost: "127.0.0.1",
      label: "",
      pendingBootstrap: { clusterId: "c", ca, seedSecret: "s".repeat(43) },
      onLeft: () => undefined,
    });
    assert.equal(await cluster.start(200), false);
    assert.equal(cluster.isReady(), false);
    for (const attempt of [
      async () => cluster.cluster(),
      async () => cluster.members(),
      async () => cluster.listJoinTokens(),
      async () => cluster.leases(),
      async () => cluster.configVersions(),
      () => cluster.issueJoinToken({ joinAddrs: ["127.0.0.1:9090"] }, "admin"),
      () => cluster.revokeJoinToken("x", "admin"),
      () => cluster.rotateSeed("admin"),
      () => cluster.ejectMember("ctl-ghost", "", "admin"),
      () => cluster.leave("admin"),
    ]) {
      await rejectsWith(attempt(), 409, "CLUSTER_NOT_READY");
    }
    await cluster.stop();
    await documents.close();
  });
});

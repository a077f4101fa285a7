// Three in-process Raft node hosts over real gRPC with mutual TLS on 127.0.0.1, LevelDB logs in
// temporary directories: election, replication, restart and catch-up, snapshot install.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RawNode, decodeConfChange, decodeMessage, encodeConfChange, encodeMessage } from "../../raft/index.js";
import type { Entry, NodeId } from "../../raft/types.js";
import { createClusterCa, issueNodeCertificate } from "../../src/cluster/identity/ca.js";
import { GrpcTransport } from "../../src/cluster/raft-host/grpc-transport.js";
import { RaftHostError } from "../../src/cluster/raft-host/host-errors.js";
import { LevelStorage } from "../../src/cluster/raft-host/level-storage.js";
import type { StateMachine } from "../../src/cluster/raft-host/raft-host-ports.js";
import { RaftNodeHost } from "../../src/cluster/raft-host/raft-node-host.js";
import { freePorts } from "./support/free-ports.js";
import { eventually } from "../support/wait.js";

/** Appends every applied payload to a list; the list is the snapshot. */
class ListStateMachine implements StateMachine {
  items: string[] = [];
  restores = 0;
  apply(entry: Entry): number {
    this.items.push(new TextDecoder().decode(entry.data));
    return this.items.length;
  }
  snapshot(): Uint8Array {
    return new TextEncoder().encode(JSON.stringify(this.items));
  }
  restore(data: Uint8Array): void {
    this.restores += 1;
    this.items = JSON.parse(new TextDecoder().decode(data)) as string[];
  }
}

interface Member {
  host: RaftNodeHost;
  transport: GrpcTransport;
  storage: LevelStorage;
  machine: ListStateMachine;
}

const ids: NodeId[] = ["n1", "n2", "n3"];
const ca = createClusterCa();
const certs = new Map(ids.map((id) => [id, issueNodeCertificate(ca, { nodeId: id })]));
const root = mkdtempSync(join(tmpdir(), "raft-node-host-"));
const members = new Map<NodeId, Member>();
let addresses: Record<NodeId, string> = {};
const snapshotIntervalEntries = 40;
const compactionMarginEntries = 5;

async function startMember(id: NodeId): Promise<Member> {
  const storage = await LevelStorage.open(join(root, id));
  await storage.bootstrap({ voters: ids, learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false });
  const transport = new GrpcTransport({
    clusterId: "host-test",
    nodeId: id,
    listenAddress: addresses[id]!,
    peers: addresses,
    tls: { caPem: ca.certPem, ...certs.get(id)! },
    codec: { encode: encodeMessage, decode: decodeMessage },
  });
  const machine = new ListStateMachine();
  const host = new RaftNodeHost({
    id,
    storage,
    stateMachine: machine,
    transport,
    createRawNode: (config) => new RawNode(config),
    confChangeCodec: { encode: encodeConfChange, decode: decodeConfChange },
    tickIntervalMs: 10,
    heartbeatTicks: 2,
    electionTicks: 20,
    snapshotIntervalEntries,
    compactionMarginEntries,
    proposalTimeoutMs: 3_000,
  });
  await transport.start();
  host.start();
  const member = { host, transport, storage, machine };
  members.set(id, member);
  return member;
}

async function stopMember(id: NodeId): Promise<void> {
  const member = members.get(id);
  if (!member) return;
  members.delete(id);
  await member.host.stop();
  await member.transport.stop();
  await member.storage.close();
}

const leader = () => eventually(() => [...members.values()].find((m) => m.host.isLeader()), "a leader");
const payload = (text: string) => new TextEncoder().encode(text);

describe("RaftNodeHost: three members over gRPC with mutual TLS and LevelDB", () => {
  before(async () => {
    const ports = await freePorts(3);
    addresses = Object.fromEntries(ids.map((id, i) => [id, `127.0.0.1:${ports[i]}`]));
    for (const id of ids) await startMember(id);
  });
  after(async () => {
    for (const id of [...members.keys()]) await stopMember(id);
    rmSync(root, { recursive: true, force: true });
  });

  it("elects one leader and replicates proposals to every member", async () => {
    const first = await leader();
    const results = await Promise.all(["a", "b", "c"].map((text) => first.host.propose(payload(text))));
    assert.deepEqual([...results].sort(), [1, 2, 3]);
    await eventually(() => [...members.values()].every((m) => m.machine.items.length === 3), "replication");
    for (const member of members.values()) assert.deepEqual(member.machine.items, first.machine.items);
  });

  it("refuses proposals and reads on a follower with NOT_LEADER naming the leader", async () => {
    const current = await leader();
    const follower = [...members.values()].find((m) => m !== current)!;
    await eventually(() => follower.host.leaderId() === current.host.id, "the follower to know the leader");
    for (const attempt of [follower.host.propose(payload("x")), follower.host.linearizableRead()]) {
      await assert.rejects(attempt, (error: unknown) => error instanceof RaftHostError && error.code === "NOT_LEADER" && error.leaderId === current.host.id);
    }
  });

  it("serves a linearizable read after a write on the leader", async () => {
    const current = await leader();
    await current.host.propose(payload("before-read"));
    await Promise.all([current.host.linearizableRead(), current.host.linearizableRead()]);
    assert.equal(current.machine.items.at(-1), "before-read");
  });

  it("a restarted follower recovers its log from disk and catches up", async () => {
    const current = await leader();
    const followerId = ids.find((id) => id !== current.host.id)!;
    await stopMember(followerId);
    for (let i = 0; i < 5; i++) await current.host.propose(payload(`while-down-${i}`));
    const restarted = await startMember(followerId);
    await eventually(() => restarted.machine.items.length === current.machine.items.length, "the restarted follower to catch up");
    assert.deepEqual(restarted.machine.items, current.machine.items);
  });

  it("a follower behind the leader's compaction is sent a snapshot", async () => {
    const current = await leader();
    const followerId = ids.find((id) => id !== current.host.id)!;
    await stopMember(followerId);
    for (let i = 0; i < snapshotIntervalEntries + 2 * compactionMarginEntries; i++) await current.host.propose(payload(`compacted-${i}`));
    await eventually(
      () => current.storage.firstIndex() > current.storage.snapshot().metadata.index - compactionMarginEntries && current.storage.snapshot().metadata.index > 0,
      "the leader to compact",
    );
    const restarted = await startMember(followerId);
    await eventually(() => restarted.machine.items.length === current.machine.items.length, "the lagging follower to catch up");
    assert.ok(restarted.machine.restores >= 1, "the follower restored a snapshot");
    assert.ok(restarted.storage.snapshot().metadata.index > 0);
    assert.deepEqual(restarted.machine.items, current.machine.items);
  });

  it("transfers leadership on request", async () => {
    const current = await leader();
    const target = ids.find((id) => id !== current.host.id && members.has(id))!;
    await eventually(() => members.get(target)!.host.applied() === current.host.applied(), "the target to be up to date");
    assert.equal(await current.host.transferLeadership(target), true);
    assert.equal((await leader()).host.id, target);
  });

  it("the whole cluster restarts from disk with every write", async () => {
    const before = (await leader()).machine.items;
    for (const id of ids) await stopMember(id);
    for (const id of ids) await startMember(id);
    const current = await leader();
    await current.host.propose(payload("after-restart"));
    assert.deepEqual(current.machine.items, [...before, "after-restart"]);
  });
});

// The node host's loop under an injected clock, with an in-memory network and a storage whose
// writes can be held back: ordering of persist and send, proposal deadlines, lost leadership.
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { MemoryStorage, RawNode, decodeConfChange, encodeConfChange } from "../../raft/index.js";
import type { ConfChange, ConfState, Entry, Message, NodeId, Snapshot } from "../../raft/types.js";
import type { TransportHandler } from "../../src/cluster/raft-host/grpc-transport.js";
import { RaftHostError } from "../../src/cluster/raft-host/host-errors.js";
import type { PersistRequest } from "../../src/cluster/raft-host/level-storage.js";
import type { HostStorage, StateMachine } from "../../src/cluster/raft-host/raft-host-ports.js";
import { RaftNodeHost } from "../../src/cluster/raft-host/raft-node-host.js";
import { FakeClock } from "../support/fake-clock.js";

/** Timers fire only when the test advances time. */
/** Moves the fake clock forward in steps of `stepMs`, firing due timers and letting the loops run. */
async function advance(clock: FakeClock, totalMs: number, stepMs = 10): Promise<void> {
  for (let elapsed = 0; elapsed < totalMs; elapsed += stepMs) {
    clock.advance(stepMs);
    await settle();
  }
}

async function settle(rounds = 5): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((resolve) => setImmediate(resolve));
}

/** MemoryStorage with the host's write side; `hold()` keeps persists pending until `release()`. */
class GatedStorage implements HostStorage {
  private readonly memory: MemoryStorage;
  private gate: Promise<void> | null = null;
  private openGate: (() => void) | null = null;
  persistsPending = 0;
  constructor(initial: ConfState) {
    this.memory = new MemoryStorage(initial);
  }
  hold(): void {
    this.gate = new Promise((resolve) => (this.openGate = resolve));
  }
  release(): void {
    this.openGate?.();
    this.gate = null;
  }
  async persist(request: PersistRequest): Promise<void> {
    this.persistsPending += 1;
    if (this.gate) await this.gate;
    this.persistsPending -= 1;
    if (request.snapshot) this.memory.applySnapshot(request.snapshot);
    if (request.entries.length > 0) this.memory.append([...request.entries]);
    if (request.hardState) this.memory.setHardState(request.hardState);
  }
  async createSnapshot(index: number, confState: ConfState, data: Uint8Array): Promise<Snapshot> {
    return this.memory.createSnapshot(index, confState, data);
  }
  async compact(index: number): Promise<void> {
    this.memory.compact(index);
  }
  initialState() {
    return this.memory.initialState();
  }
  entries(lo: number, hi: number, maxSizeBytes: number): Entry[] {
    return this.memory.entries(lo, hi, maxSizeBytes);
  }
  term(index: number): number {
    return this.memory.term(index);
  }
  firstIndex(): number {
    return this.memory.firstIndex();
  }
  lastIndex(): number {
    return this.memory.lastIndex();
  }
  snapshot(): Snapshot {
    return this.memory.snapshot();
  }
}

class NullStateMachine implements StateMachine {
  applied: string[] = [];
  apply(entry: Entry): string {
    const text = new TextDecoder().decode(entry.data);
    this.applied.push(text);
    return text;
  }
  snapshot(): Uint8Array {
    return new Uint8Array();
  }
  restore(): void {}
}

/** Settles a promise into its rejection reason (or null) at once, so a rejection is never unhandled. */
function outcome(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => null,
    (error: unknown) => error,
  );
}

const hostError = (code: string) => (error: unknown) => error instanceof RaftHostError && error.code === code;

/** Delivers messages between hosts in the same process; `cut` drops a node's traffic both ways. */
class MemoryNetwork {
  readonly handlers = new Map<NodeId, TransportHandler>();
  readonly sent: Message[] = [];
  readonly cut = new Set<NodeId>();
  transportFor(id: NodeId) {
    return {
      setHandler: (handler: TransportHandler) => this.handlers.set(id, handler),
      send: (messages: readonly Message[]) => {
        for (const message of messages) {
          this.sent.push(message);
          if (this.cut.has(message.from) || this.cut.has(message.to)) continue;
          queueMicrotask(() => this.handlers.get(message.to)?.receive(message));
        }
      },
    };
  }
}

const ids: NodeId[] = ["a", "b", "c"];
const confState: ConfState = { voters: ids, learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false };

const running: RaftNodeHost[] = [];

function cluster(options: { proposalTimeoutMs?: number } = {}) {
  const clock = new FakeClock();
  const network = new MemoryNetwork();
  const confChanges: { id: NodeId; change: ConfChange }[] = [];
  const nodes = new Map(
    ids.map((id, i) => {
      const storage = new GatedStorage(confState);
      const host = new RaftNodeHost({
        id,
        storage,
        stateMachine: new NullStateMachine(),
        transport: network.transportFor(id),
        createRawNode: (config) => new RawNode(config),
        confChangeCodec: { encode: encodeConfChange, decode: decodeConfChange },
        clock,
        tickIntervalMs: 10,
        heartbeatTicks: 1,
        electionTicks: 10,
        random: (n) => (i * 7) % n,
        proposalTimeoutMs: options.proposalTimeoutMs ?? 5_000,
        onConfChange: (change) => confChanges.push({ id, change }),
      });
      host.start();
      running.push(host);
      return [id, { host, storage }] as const;
    }),
  );
  return { clock, network, nodes, confChanges };
}

async function electA(c: ReturnType<typeof cluster>): Promise<RaftNodeHost> {
  const a = c.nodes.get("a")!.host;
  a.campaign();
  for (let i = 0; i < 50 && !a.isLeader(); i++) await advance(c.clock, 10);
  assert.ok(a.isLeader(), "a became leader");
  return a;
}

describe("RaftNodeHost loop (injected clock, in-memory network)", () => {
  afterEach(async () => {
    for (const host of running.splice(0)) await host.stop();
  });

  it("sends no vote request before the new term and vote are durable", async () => {
    const c = cluster();
    const a = c.nodes.get("a")!;
    await advance(c.clock, 20); // the bootstrap configuration is persisted and applied
    a.storage.hold();
    a.host.campaign();
    await advance(c.clock, 30);
    const votesWhileHeld = c.network.sent.filter((m) => m.from === "a" && m.type === "vote");
    assert.ok(a.storage.persistsPending > 0, "a persist is waiting");
    assert.deepEqual(votesWhileHeld, [], "vote requests left before the vote was durable");
    a.storage.release();
    await advance(c.clock, 30);
    assert.ok(c.network.sent.some((m) => m.from === "a" && m.type === "vote"));
    assert.ok(a.storage.initialState().hardState.vote === "a");
  });

  it("sends no append acknowledgement before the follower's entries are durable", async () => {
    const c = cluster();
    const leader = await electA(c);
    const b = c.nodes.get("b")!;
    b.storage.hold();
    const proposal = leader.propose(new TextEncoder().encode("x"));
    await advance(c.clock, 30);
    const lastIndex = leader.status().hardState.commit;
    const early = c.network.sent.filter((m) => m.from === "b" && m.type === "app-resp" && m.index > lastIndex);
    assert.deepEqual(early, []);
    b.storage.release();
    assert.equal(await proposal, "x");
  });

  it("sends the leader's appends while its own write is in progress (thesis §10.2.1)", async () => {
    const c = cluster();
    const leader = await electA(c);
    const a = c.nodes.get("a")!;
    const commitBefore = leader.status().hardState.commit;
    a.storage.hold();
    const proposal = leader.propose(new TextEncoder().encode("parallel"));
    await advance(c.clock, 30);
    assert.ok(a.storage.persistsPending > 0, "the leader's write is held");
    const appended = c.network.sent.filter(
      (m) => m.from === "a" && m.type === "app" && m.entries.some((e) => new TextDecoder().decode(e.data).endsWith("parallel")),
    );
    assert.deepEqual(appended.map((m) => m.to).sort(), ["b", "c"]);
    const index = appended[0]!.entries.at(-1)!.index;
    // b and c persisted and acknowledged: a quorum without the leader's own write.
    assert.ok(c.network.sent.some((m) => m.from === "b" && m.type === "app-resp" && m.index >= index));
    assert.equal(leader.status().hardState.commit, index, "committed on the followers' acknowledgements");
    assert.ok(leader.status().progress!["a"]!.match < index, "the leader counted its own write before it was durable");
    assert.ok(leader.status().hardState.commit > commitBefore);
    a.storage.release();
    assert.equal(await proposal, "parallel");
  });

  it("rejects a proposal with TIMEOUT when the injected clock passes its deadline", async () => {
    const c = cluster({ proposalTimeoutMs: 50 });
    const leader = await electA(c);
    c.network.cut.add("a");
    const proposal = outcome(leader.propose(new TextEncoder().encode("lost")));
    await advance(c.clock, 80);
    const error = await proposal;
    assert.ok(hostError("TIMEOUT")(error), String(error));
    assert.equal((error as RaftHostError).outcomeKnown, false);
  });

  it("rejects outstanding proposals with LEADERSHIP_LOST when the leader steps down", async () => {
    const c = cluster();
    const leader = await electA(c);
    c.network.cut.add("a");
    const proposal = outcome(leader.propose(new TextEncoder().encode("orphan")));
    const read = outcome(leader.linearizableRead());
    await advance(c.clock, 400);
    assert.ok(hostError("LEADERSHIP_LOST")(await proposal));
    assert.ok(hostError("LEADERSHIP_LOST")(await read));
    assert.equal(leader.isLeader(), false);
  });

  it("applies a membership change and resolves it with the new configuration", async () => {
    const c = cluster();
    const leader = await electA(c);
    const proposal = leader.proposeConfChange({ changes: [{ type: "add-learner", nodeId: "d" }], context: new TextEncoder().encode("d@addr") });
    await advance(c.clock, 50);
    const confState = await proposal;
    assert.deepEqual(confState.learners, ["d"]);
    assert.deepEqual([...confState.voters].sort(), ids);
    await advance(c.clock, 50);
    for (const { host } of c.nodes.values()) assert.deepEqual(host.status().config.learners, ["d"]);
    const changes = c.confChanges.filter((entry) => entry.change.changes.some((single) => single.nodeId === "d"));
    assert.equal(changes.length, 3, "every member reported the change");
    assert.equal(new TextDecoder().decode(changes[0]!.change.context), "d@addr", "the proposer's context reaches onConfChange without the host's header");
  });

  it("a stopped host rejects new and outstanding requests with STOPPED", async () => {
    const c = cluster();
    const leader = await electA(c);
    c.network.cut.add("a");
    const proposal = outcome(leader.propose(new TextEncoder().encode("late")));
    await leader.stop();
    assert.ok(hostError("STOPPED")(await proposal));
    await assert.rejects(leader.propose(new Uint8Array([1])), hostError("STOPPED"));
  });

  it("ticks at a fixed rate: a late tick does not push the later ones back, and more than an interval late skips the missed ones", async () => {
    const clock = new FakeClock();
    // Every timer of the host fires `lateMs` after it was due, as on a busy event loop.
    let lateMs = 30;
    const lateClock = {
      nowMs: () => clock.nowMs(),
      setTimeout: (callback: () => void, delayMs: number) => clock.setTimeout(callback, delayMs + lateMs),
      setInterval: clock.setInterval.bind(clock),
    };
    let ticks = 0;
    const host = new RaftNodeHost({
      id: "a",
      storage: new GatedStorage(confState),
      stateMachine: new NullStateMachine(),
      transport: new MemoryNetwork().transportFor("a"),
      createRawNode: (config) => {
        const node = new RawNode(config);
        const tick = node.tick.bind(node);
        node.tick = () => {
          ticks += 1;
          tick();
        };
        return node;
      },
      confChangeCodec: { encode: encodeConfChange, decode: decodeConfChange },
      clock: lateClock,
      tickIntervalMs: 100,
      heartbeatTicks: 1,
      electionTicks: 10,
    });
    running.push(host);
    host.start();
    await advance(clock, 10_000 + lateMs, 10);
    // Drifting ticks would come every 130 ms (76 in 10 s); fixed-rate ones every 100 ms.
    assert.equal(ticks, 100);
    lateMs = 250;
    const before = ticks;
    await advance(clock, 10_000, 10);
    // Each tick 250 ms late: the two due meanwhile are dropped, not run in a burst; one tick per 300 ms.
    assert.ok(ticks - before >= 32 && ticks - before <= 34, `${ticks - before} ticks in 10 s`);
  });
});

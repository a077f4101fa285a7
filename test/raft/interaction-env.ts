/**
 * The world of a scenario file: a set of RawNodes with MemoryStorages, a network of queued
 * messages that the script delivers (or drops) explicitly, and one handler per command.
 * After every command that can change state, each node whose role, term or leader changed
 * prints a `~` line.
 */
import assert from "node:assert/strict";
import { decodeConfChange } from "../../raft/codec.js";
import { RaftError } from "../../raft/errors.js";
import { MemoryStorage } from "../../raft/memory-storage.js";
import { RawNode } from "../../raft/raw-node.js";
import type { ConfChangeSingle, ConfChangeTransition, ConfState, Entry, Message, RaftConfig, Ready, Snapshot } from "../../raft/types.js";
import { type TestCommand, argBool, argNumber, argString, argValues, positional } from "./datadriven.js";
import { formatConfState, formatEntry, formatHardState, formatMessage, formatReady, formatSnapshot } from "./format.js";

interface NodeUnderTest {
  readonly id: string;
  node: RawNode;
  readonly storage: MemoryStorage;
  readonly config: RaftConfig;
  /** The state machine: applied entries' data (the first may be a restored snapshot's). */
  applied: { index: number; text: string }[];
  appliedIndex: number;
  lastCommit: number;
  /** A Ready whose early messages were sent but whose write is still pending (`ready-send-early`). */
  pending: Ready | null;
}

const stabilizeRoundsMax = 1000;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

export class InteractionEnv {
  private readonly nodes = new Map<string, NodeUnderTest>();
  private queue: Message[] = [];
  private readonly cutLinks = new Set<string>();
  private readonly summaries = new Map<string, string>();

  handle(command: TestCommand): string {
    const out: string[] = [];
    const handler = this.handlers[command.name];
    assert.ok(handler !== undefined, `unknown command ${command.name}`);
    handler(command, out);
    if (!readOnlyCommands.has(command.name)) out.push(...this.stateChanges());
    return out.join("\n");
  }

  private readonly handlers: Record<string, (c: TestCommand, out: string[]) => void> = {
    "add-nodes": (c, out) => this.addNodes(c, out),
    campaign: (c, out) => this.guard(out, () => this.node(c).node.campaign()),
    propose: (c, out) => {
      const [id, data] = positional(c);
      this.guard(out, () => this.get(id).node.propose(encoder.encode(data ?? "")));
    },
    "propose-conf-change": (c, out) => this.proposeConfChange(c, out),
    "transfer-leadership": (c, out) => this.guard(out, () => this.get(argString(c, "from", "")).node.transferLeadership(argString(c, "to", ""))),
    "read-index": (c, out) => {
      const [id, ctx] = positional(c);
      this.guard(out, () => this.get(id).node.readIndex(encoder.encode(ctx)));
    },
    "tick-election": (c) => this.ticks(c, (n) => n.config.electionTick),
    "tick-heartbeat": (c) => this.ticks(c, (n) => n.config.heartbeatTick),
    tick: (c) => this.ticks(c, () => argNumber(c, "n", 1)),
    "process-ready": (c, out) => {
      for (const id of this.idsOrAll(c)) out.push(...this.processReady(id));
    },
    "ready-send-early": (c, out) => {
      for (const id of positional(c)) out.push(...this.readySendEarly(id));
    },
    "persist-ready": (c, out) => {
      for (const id of positional(c)) out.push(...this.persistReady(id));
    },
    "deliver-msgs": (c, out) => this.deliverMsgs(c, out),
    stabilize: (c, out) => this.stabilize(this.idsOrAll(c), out),
    partition: (c) => {
      const side = new Set(positional(c));
      for (const a of this.nodes.keys()) {
        for (const b of this.nodes.keys()) if (side.has(a) !== side.has(b)) this.cutLinks.add(`${a}->${b}`);
      }
    },
    "cut-link": (c) => this.cutLinks.add(`${argString(c, "from", "")}->${argString(c, "to", "")}`),
    heal: (c) => {
      const ids = positional(c);
      if (ids.length === 0) this.cutLinks.clear();
      for (const link of [...this.cutLinks]) {
        const [a, b] = link.split("->");
        if (ids.includes(a) || ids.includes(b)) this.cutLinks.delete(link);
      }
    },
    compact: (c, out) => {
      const [id, index] = positional(c);
      const n = this.get(id);
      const confState = n.node.status().config;
      n.storage.createSnapshot(Number(index), confState, encoder.encode(this.snapshotData(n, Number(index))));
      n.storage.compact(Number(index));
      out.push(...this.raftLog(n));
    },
    "send-snapshot": (c) => {
      const [from, to] = positional(c);
      const n = this.get(from);
      const snapshot = n.storage.snapshot();
      this.queue.push({
        type: "snap",
        from,
        to,
        term: n.node.status().hardState.term,
        logTerm: 0,
        index: 0,
        entries: [],
        commit: 0,
        snapshot,
        reject: false,
        rejectHint: 0,
        context: new Uint8Array(),
      });
    },
    "report-snapshot": (c) => {
      const [from, to] = positional(c);
      this.get(from).node.reportSnapshot(to, argBool(c, "ok", true));
    },
    "report-unreachable": (c) => {
      const [from, to] = positional(c);
      this.get(from).node.reportUnreachable(to);
    },
    "raft-log": (c, out) => out.push(...this.raftLog(this.node(c))),
    "raft-state": (c, out) => {
      for (const id of this.idsOrAll(c)) out.push(this.stateLine(this.get(id)));
    },
    status: (c, out) => this.status(this.node(c), out),
    applied: (c, out) => {
      const n = this.node(c);
      out.push(`${n.id}: applied=${n.appliedIndex} [${n.applied.map((a) => a.text).join(" ")}]`);
    },
    restart: (c, out) => {
      for (const id of positional(c)) {
        const n = this.get(id);
        const snap = n.storage.snapshot();
        // A Ready whose write was pending is lost with the process.
        if (n.pending !== null) out.push(`${n.id}: lost a Ready that was not persisted`);
        n.pending = null;
        n.node = new RawNode({ ...n.config, applied: snap.metadata.index });
        n.applied = snap.metadata.index > 0 ? [{ index: snap.metadata.index, text: `<${decoder.decode(snap.data)}>` }] : [];
        n.appliedIndex = snap.metadata.index;
        out.push(this.stateLine(n));
      }
    },
  };

  // ---- nodes -------------------------------------------------------------------------------

  private addNodes(c: TestCommand, out: string[]): void {
    const count = Number(positional(c)[0]);
    const confState: ConfState = {
      voters: argValues(c, "voters") ?? [],
      learners: argValues(c, "learners") ?? [],
      votersOutgoing: [],
      learnersNext: [],
      autoLeave: false,
    };
    const index = argNumber(c, "index", 0);
    const jitters = argValues(c, "jitter") ?? [];
    for (let k = 0; k < count; k++) {
      const id = String(this.nodes.size + 1);
      const jitter = Number(jitters[k] ?? 0);
      const storage = new MemoryStorage(confState);
      if (index > 0) {
        storage.applySnapshot({ metadata: { index, term: 1, confState }, data: encoder.encode(argString(c, "content", "")) });
      }
      // A given log: one entry per listed term, after the snapshot.
      const logTerms = argValues(c, "log-terms") ?? [];
      storage.append(logTerms.map((t, i) => ({ term: Number(t), index: index + 1 + i, type: "normal" as const, data: new Uint8Array() })));
      const term = argNumber(c, "term", 0);
      if (term > 0) storage.setHardState({ term, vote: null, commit: argNumber(c, "commit", index) });
      const config: RaftConfig = {
        id,
        storage,
        electionTick: argNumber(c, "election-tick", 10),
        heartbeatTick: argNumber(c, "heartbeat-tick", 1),
        // The scenario controls time exactly: the randomized part of the election timeout is the
        // node's fixed jitter (0 unless given), so `tick-election` times out a node with none.
        random: (n) => Math.min(jitter, n - 1),
        preVote: argBool(c, "prevote", true),
        checkQuorum: argBool(c, "checkquorum", true),
        maxInflightMsgs: argNumber(c, "max-inflight", 256),
        maxSizePerMsgBytes: argNumber(c, "max-msg-size", 1024 * 1024),
        maxUncommittedEntriesSizeBytes: argNumber(c, "max-uncommitted-size", 64 * 1024 * 1024),
        maxCommittedSizePerReadyBytes: argNumber(c, "max-committed-size-per-ready", 1024 * 1024),
      };
      const n: NodeUnderTest = {
        id,
        node: new RawNode(config),
        storage,
        config,
        applied: index > 0 ? [{ index, text: `<${argString(c, "content", "")}>` }] : [],
        appliedIndex: index,
        lastCommit: index,
        pending: null,
      };
      this.nodes.set(id, n);
      this.summaries.set(id, this.summary(n));
      out.push(this.stateLine(n));
    }
  }

  private get(id: string | undefined): NodeUnderTest {
    const n = this.nodes.get(id ?? "");
    assert.ok(n !== undefined, `no node ${id}`);
    return n;
  }

  private node(c: TestCommand): NodeUnderTest {
    return this.get(positional(c)[0]);
  }

  private idsOrAll(c: TestCommand): string[] {
    const ids = positional(c);
    return ids.length > 0 ? ids : [...this.nodes.keys()];
  }

  /** Runs an action, printing an expected Raft failure as `error: CODE (reason)`. */
  private guard(out: string[], action: () => void): void {
    try {
      action();
    } catch (error) {
      if (!(error instanceof RaftError)) throw error;
      out.push(`error: ${error.code}${error.reason !== undefined ? ` (${error.reason})` : ""}`);
    }
  }

  private proposeConfChange(c: TestCommand, out: string[]): void {
    const [id, ...changes] = positional(c);
    const parsed: ConfChangeSingle[] = changes.map((token) => {
      const kind = token[0];
      const nodeId = token.slice(1);
      if (kind === "v") return { type: "add-voter", nodeId };
      if (kind === "l") return { type: "add-learner", nodeId };
      assert.equal(kind, "r", `bad change ${token}`);
      return { type: "remove-node", nodeId };
    });
    const transition = argString(c, "transition", "auto") as ConfChangeTransition;
    this.guard(out, () => this.get(id).node.proposeConfChange({ changes: parsed, transition }));
  }

  private ticks(c: TestCommand, count: (n: NodeUnderTest) => number): void {
    for (const id of positional(c)) {
      const n = this.get(id);
      for (let i = count(n); i > 0; i--) n.node.tick();
    }
  }

  // ---- the host loop -----------------------------------------------------------------------

  private processReady(id: string): string[] {
    const n = this.get(id);
    // A node whose write is pending takes no Ready until `persist-ready`.
    if (n.pending !== null || !n.node.hasReady()) return [];
    const rd = n.node.ready();
    return [...formatReady(id, rd), ...this.finishReady(n, rd)];
  }

  /** Takes a Ready, sends the messages allowed before its write, and leaves the write pending. */
  private readySendEarly(id: string): string[] {
    const n = this.get(id);
    assert.ok(n.pending === null, `${id} already has a Ready pending`);
    if (!n.node.hasReady()) return [];
    const rd = n.node.ready();
    n.pending = rd;
    this.queue.push(...rd.messages.slice(0, rd.messagesBeforePersist));
    return [...formatReady(id, rd), `  sent before persisting: ${rd.messagesBeforePersist} of ${rd.messages.length} messages`];
  }

  /** Completes the pending Ready of `ready-send-early`: the write is durable now. */
  private persistReady(id: string): string[] {
    const n = this.get(id);
    const rd = n.pending;
    assert.ok(rd !== null, `${id} has no Ready pending`);
    n.pending = null;
    return [`> ${id} persisted its Ready`, ...this.finishReady(n, rd, rd.messagesBeforePersist)];
  }

  /** Persists (what the messages depend on), sends the messages from `sentAlready` on, applies, advances. */
  private finishReady(n: NodeUnderTest, rd: Ready, sentAlready = 0): string[] {
    const id = n.id;
    const out: string[] = [];
    if (rd.snapshot !== null) n.storage.applySnapshot(rd.snapshot);
    n.storage.append([...rd.entries]);
    if (rd.hardState !== null) {
      assert.ok(rd.hardState.commit >= n.lastCommit, `${id}: commit moved backwards ${n.lastCommit} -> ${rd.hardState.commit}`);
      n.lastCommit = rd.hardState.commit;
      n.storage.setHardState(rd.hardState);
    }
    this.queue.push(...rd.messages.slice(sentAlready));
    if (rd.snapshot !== null) {
      n.applied = [{ index: rd.snapshot.metadata.index, text: `<${decoder.decode(rd.snapshot.data)}>` }];
      n.appliedIndex = rd.snapshot.metadata.index;
    }
    for (const e of rd.committedEntries) out.push(...this.apply(n, e));
    n.node.advance(rd);
    return out;
  }

  private apply(n: NodeUnderTest, e: Entry): string[] {
    assert.equal(e.index, n.appliedIndex + 1, `${n.id}: applied ${e.index} after ${n.appliedIndex}`);
    n.appliedIndex = e.index;
    if (e.type === "conf-change") {
      const cs = n.node.applyConfChange(decodeConfChange(e.data));
      return [`  ${n.id} applied conf change: ${formatConfState(cs)}`];
    }
    if (e.data.byteLength > 0) n.applied.push({ index: e.index, text: decoder.decode(e.data) });
    return [];
  }

  private deliverMsgs(c: TestCommand, out: string[]): void {
    const ids = this.idsOrAll(c);
    const dropTo = new Set(argValues(c, "drop") ?? []);
    const types = argValues(c, "type");
    const from = argValues(c, "from");
    const keep = argBool(c, "keep", false);
    const reverse = argBool(c, "reverse", false);
    const selected: Message[] = [];
    const rest: Message[] = [];
    for (const m of this.queue) {
      const wanted = (ids.includes(m.to) || dropTo.has(m.to)) && (types === null || types.includes(m.type)) && (from === null || from.includes(m.from));
      (wanted ? selected : rest).push(m);
    }
    this.queue = keep ? this.queue : rest;
    if (reverse) selected.reverse();
    for (const m of selected) {
      if (dropTo.has(m.to)) out.push(`dropped: ${formatMessage(m)}`);
      else this.deliver(m, out);
    }
  }

  private deliver(m: Message, out: string[]): void {
    if (this.cutLinks.has(`${m.from}->${m.to}`)) {
      out.push(`dropped (partition): ${formatMessage(m)}`);
      return;
    }
    out.push(formatMessage(m));
    const n = this.nodes.get(m.to);
    if (n === undefined) return;
    this.guard(out, () => n.node.step(m));
  }

  private stabilize(ids: string[], out: string[]): void {
    for (let round = 0; round < stabilizeRoundsMax; round++) {
      let progressed = false;
      for (const id of ids) {
        const lines = this.processReady(id);
        if (lines.length > 0) progressed = true;
        out.push(...lines);
      }
      const deliverable = this.queue.filter((m) => ids.includes(m.to));
      if (deliverable.length > 0) {
        progressed = true;
        this.queue = this.queue.filter((m) => !ids.includes(m.to));
        for (const m of deliverable) this.deliver(m, out);
      }
      if (!progressed) return;
    }
    assert.fail(`stabilize did not settle within ${stabilizeRoundsMax} rounds`);
  }

  // ---- printing ----------------------------------------------------------------------------

  private summary(n: NodeUnderTest): string {
    const s = n.node.status();
    return `${s.softState.role} term=${s.hardState.term} lead=${s.softState.leader ?? "none"}`;
  }

  private stateChanges(): string[] {
    const out: string[] = [];
    for (const n of this.nodes.values()) {
      const now = this.summary(n);
      if (this.summaries.get(n.id) !== now) out.push(`~ ${n.id}: ${now}`);
      this.summaries.set(n.id, now);
    }
    return out;
  }

  private stateLine(n: NodeUnderTest): string {
    const s = n.node.status();
    return `${n.id}: ${s.softState.role} ${formatHardState(s.hardState)} lead=${s.softState.leader ?? "none"} applied=${s.applied} last=${n.storage.lastIndex()} ${formatConfState(s.config)}`;
  }

  private raftLog(n: NodeUnderTest): string[] {
    const out: string[] = [];
    const snap: Snapshot = n.storage.snapshot();
    if (snap.metadata.index > 0) out.push(`snapshot ${formatSnapshot(snap)}`);
    const first = n.storage.firstIndex();
    const last = n.storage.lastIndex();
    if (last >= first) for (const e of n.storage.entries(first, last + 1, Number.MAX_SAFE_INTEGER)) out.push(formatEntry(e));
    if (out.length === 0) out.push("log is empty");
    return out;
  }

  private status(n: NodeUnderTest, out: string[]): void {
    const s = n.node.status();
    if (s.progress === null) {
      out.push(`${n.id} is not the leader`);
      return;
    }
    for (const [id, p] of Object.entries(s.progress)) {
      out.push(
        `${id}: ${p.state} match=${p.match} next=${p.next}${p.isLearner ? " learner" : ""}${p.inflight > 0 ? ` inflight=${p.inflight}` : ""}${p.recentActive ? "" : " inactive"}`,
      );
    }
    if (s.leadTransferee !== null) out.push(`transferring to ${s.leadTransferee}`);
  }

  private snapshotData(n: NodeUnderTest, index: number): string {
    assert.ok(index <= n.appliedIndex, `compact ${index} beyond applied ${n.appliedIndex}`);
    return n.applied
      .filter((a) => a.index <= index)
      .map((a) => a.text)
      .join(" ");
  }
}

const readOnlyCommands = new Set(["raft-log", "raft-state", "status", "applied"]);

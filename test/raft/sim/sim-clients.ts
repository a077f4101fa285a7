/**
 * Simulated clients: each runs one operation at a time (put, get or compare-and-set on a few keys)
 * against the node it believes leads, records it in a {@link HistoryRecorder}, and gives up after a
 * timeout (the operation is then recorded without a return: it may or may not have happened). A
 * retry is a new operation. Requests refused before anything happened (node down, not the leader,
 * proposal dropped) are discarded from the history, since they certainly had no effect.
 */
import { HistoryRecorder, type OperationHandle, type OperationKind } from "../../support/linearizability.js";
import type { Prng } from "./prng.js";
import type { SimNode, SubmitOutcome } from "./sim-node.js";

export interface ClientTuning {
  clientCount: number;
  keys: readonly string[];
  opTimeoutMs: number;
  /** Probability that a request goes to a random node instead of the believed leader. */
  randomTargetRate: number;
  thinkMinMs: number;
  thinkMaxMs: number;
  /** One-way latency between a client and a node. */
  latencyMinMs: number;
  latencyMaxMs: number;
}

export interface ClientEnvironment {
  readonly prng: Prng;
  readonly nodes: readonly SimNode[];
  readonly recorder: HistoryRecorder;
  readonly tuning: ClientTuning;
  nowMs(): number;
  schedule(delayMs: number, run: () => void): void;
  trace(line: string): void;
}

export interface ClientStats {
  invoked: number;
  completed: number;
  timedOut: number;
  discarded: number;
}

interface ClientState {
  readonly id: number;
  leaderGuess: SimNode | null;
  current: OperationHandle | null;
  currentOpId: number;
  opsIssued: number;
}

export class SimClients {
  readonly stats: ClientStats = { invoked: 0, completed: 0, timedOut: 0, discarded: 0 };
  private running = false;
  private opIdNext = 1;
  private readonly clients: ClientState[];
  /** Values recently written per key, to aim compare-and-sets at plausible expectations. */
  private readonly recentValues = new Map<string, string[]>();
  private static readonly recentValuesMax = 4;

  constructor(private readonly env: ClientEnvironment) {
    this.clients = Array.from({ length: env.tuning.clientCount }, (_, id) => ({
      id,
      leaderGuess: null,
      current: null,
      currentOpId: 0,
      opsIssued: 0,
    }));
  }

  start(): void {
    this.running = true;
    for (const client of this.clients) this.scheduleNext(client);
  }

  /** No new operations; those in flight still complete or time out. */
  stop(): void {
    this.running = false;
  }

  private scheduleNext(client: ClientState): void {
    if (!this.running) return;
    const t = this.env.tuning;
    this.env.schedule(this.env.prng.between(t.thinkMinMs, t.thinkMaxMs), () => this.issue(client));
  }

  private issue(client: ClientState): void {
    if (!this.running || client.current !== null) return;
    const { prng, recorder, tuning } = this.env;
    const kind = prng.pick<OperationKind>(["put", "put", "get", "get", "get", "cas", "cas"]);
    const key = prng.pick(tuning.keys);
    const value = `c${client.id}.${client.opsIssued++}`;
    const opId = this.opIdNext++;
    const nowMs = this.env.nowMs();
    let handle: OperationHandle;
    let expected: string | null = null;
    if (kind === "put") handle = recorder.invoke(client.id, kind, key, { value }, nowMs);
    else if (kind === "get") handle = recorder.invoke(client.id, kind, key, {}, nowMs);
    else {
      const recent = this.recentValues.get(key) ?? [];
      expected = recent.length > 0 && prng.chance(0.85) ? prng.pick(recent) : null;
      handle = recorder.invoke(client.id, kind, key, { expected, value }, nowMs);
    }
    if (kind !== "get") this.remember(key, value);
    client.current = handle;
    client.currentOpId = opId;
    this.stats.invoked++;
    // Now and then a client asks a node at random, as a client with a stale view of the cluster
    // would: that is how a deposed leader that still believes it leads gets asked.
    const target = client.leaderGuess === null || prng.chance(tuning.randomTargetRate) ? prng.pick(this.env.nodes) : client.leaderGuess;
    this.env.trace(
      `client ${client.id} op ${opId} ${kind}(${key}${kind === "cas" ? `, ${String(expected)} → ${value}` : kind === "put" ? `, ${value}` : ""}) → ${target.id}`,
    );
    this.env.schedule(tuning.opTimeoutMs, () => this.timeOut(client, handle));
    // The server handles a request even if the client gave up on it meanwhile (it sat in a paused
    // server's socket buffer): a timed-out operation may still take effect.
    const arrive = (): void => {
      let outcome: SubmitOutcome;
      if (!target.alive) outcome = "not-leader";
      else if (kind === "get") {
        outcome = target.submitRead(opId, key, (read) => this.respond(client, handle, target, read));
      } else {
        const command =
          kind === "put"
            ? ({ clientId: client.id, opId, kind: "put", key, value } as const)
            : ({ clientId: client.id, opId, kind: "cas", key, expected, value } as const);
        outcome = target.submitWrite(command, (result) => this.respond(client, handle, target, result.kind === "cas" ? result.swapped : undefined));
      }
      this.env.trace(`client ${client.id} op ${opId}: ${target.id} says ${outcome}`);
      if (outcome === "accepted") return;
      // The node refused before doing anything: answer the client, which forgets the operation.
      const hint = target.alive ? target.soft.leader : null;
      this.env.schedule(this.latencyMs(), () => {
        if (client.current !== handle) return;
        recorder.discard(handle);
        this.stats.discarded++;
        client.current = null;
        client.leaderGuess = hint === null || hint === target.id ? null : (this.env.nodes.find((n) => n.id === hint) ?? null);
        this.scheduleNext(client);
      });
    };
    this.env.schedule(this.latencyMs(), () => target.whenAwake(arrive));
  }

  private respond(client: ClientState, handle: OperationHandle, server: SimNode, output: unknown): void {
    this.env.schedule(this.latencyMs(), () => {
      if (client.current !== handle) return;
      client.leaderGuess = server;
      this.env.trace(`client ${client.id} op ${client.currentOpId} returns ${JSON.stringify(output) ?? "ok"} from ${server.id}`);
      this.env.recorder.complete(handle, output, this.env.nowMs());
      this.stats.completed++;
      client.current = null;
      this.scheduleNext(client);
    });
  }

  private timeOut(client: ClientState, handle: OperationHandle): void {
    if (client.current !== handle) return;
    this.env.trace(`client ${client.id} op ${client.currentOpId} timed out`);
    this.env.recorder.timeout(handle);
    this.stats.timedOut++;
    client.current = null;
    client.leaderGuess = null;
    this.scheduleNext(client);
  }

  private remember(key: string, value: string): void {
    const recent = this.recentValues.get(key) ?? [];
    recent.push(value);
    if (recent.length > SimClients.recentValuesMax) recent.shift();
    this.recentValues.set(key, recent);
  }

  private latencyMs(): number {
    const t = this.env.tuning;
    return this.env.prng.between(t.latencyMinMs, t.latencyMaxMs);
  }
}

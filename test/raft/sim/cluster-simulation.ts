/**
 * One seeded whole-cluster run: 3 or 5 nodes, clients, and a fault schedule (message drop, delay,
 * reorder, duplication, partitions including one-way ones, crash-restart with loss of unsynced
 * writes), all drawn from one seed. The run has three phases in virtual time:
 *
 *   chaos  — faults come and go while clients operate;
 *   heal   — the network is repaired and every node restarted; clients keep operating;
 *   drain  — clients stop; in-flight operations complete or time out.
 *
 * Safety is checked at every step by the {@link SafetyMonitor}; at the end every node must have
 * converged to the same applied state (liveness after healing) and the recorded client history must
 * be linearizable.
 */
import { ConfChangeType, type ConfChange, type ConfState, type Message, type NodeId } from "../../../raft/types.js";
import { checkLinearizable, HistoryRecorder } from "../../support/linearizability.js";
import { EventQueue } from "./event-queue.js";
import { Prng } from "./prng.js";
import { SafetyMonitor, SafetyViolation } from "./safety-monitor.js";
import { SimClients, type ClientStats, type ClientTuning } from "./sim-clients.js";
import { calmNetwork, SimNetwork, type NetworkFaults, type NetworkStats } from "./sim-network.js";
import { SimNode, type HostSabotage, type NodeTuning, type RaftLibrary } from "./sim-node.js";

/** Virtual time between two ticks of a node whose clock keeps time (and between fault draws). */
const tickIntervalMs = 10;
const chaosTicks = 160;
const healTicks = 60;
/** Beyond the client timeout, so every operation has settled when the run ends. */
const drainExtraTicks = 10;
/** A runaway run (e.g. a Ready that never empties) fails instead of spinning. */
const eventsPerRunMax = 1_000_000;
const checkerTimeoutMs = 20_000;

export interface ScenarioParameters {
  /** Voters at the start. */
  readonly nodeCount: number;
  /** Nodes that start outside the cluster and may be added (as learners or voters) later. */
  readonly spareCount: number;
  readonly reconfigureRatePerTick: number;
  /** Each node's own tick interval: clocks that drift apart (a slow timer, an overloaded host). */
  readonly nodeTickIntervalsMs: readonly number[];
  readonly faults: NetworkFaults;
  readonly crashRatePerTick: number;
  readonly partitionRatePerTick: number;
  readonly downtimeMaxTicks: number;
  readonly partitionMaxTicks: number;
  readonly pauseRatePerTick: number;
  readonly pauseMaxTicks: number;
  readonly transferRatePerTick: number;
  readonly node: NodeTuning;
  readonly clients: ClientTuning;
}

export interface SimulationStats {
  virtualMs: number;
  events: number;
  leaderElections: number;
  crashes: number;
  lostWrites: number;
  partitions: number;
  confChanges: number;
  pauses: number;
  transfers: number;
  snapshotsTaken: number;
  snapshotsInstalled: number;
  committedIndex: number;
  network: NetworkStats;
  clients: ClientStats;
}

export type SimulationFailureKind = "safety" | "linearizability" | "liveness" | "exception" | "checker-timeout";

export interface SimulationReport {
  readonly seed: number;
  readonly scenario: ScenarioParameters;
  readonly stats: SimulationStats;
  readonly failure: { readonly kind: SimulationFailureKind; readonly message: string } | null;
}

/** Draws a scenario (cluster size, fault rates, tunings) from the seed. */
export function drawScenario(prng: Prng): ScenarioParameters {
  const delayMaxMs = prng.between(2, 8);
  const nodeCount = prng.chance(0.5) ? 3 : 5;
  const reconfigures = prng.chance(0.5);
  const spareCount = reconfigures ? prng.between(1, 3) : 0;
  const clocksDrift = prng.chance(0.5);
  return {
    nodeCount,
    spareCount,
    reconfigureRatePerTick: reconfigures ? prng.pick([0.01, 0.03]) : 0,
    nodeTickIntervalsMs: Array.from({ length: nodeCount + spareCount }, () => (clocksDrift ? prng.between(7, 15) : tickIntervalMs)),
    faults: {
      dropRate: prng.pick([0, 0.01, 0.05, 0.1, 0.2]),
      duplicateRate: prng.pick([0, 0.02, 0.1]),
      longDelayRate: prng.pick([0, 0.02, 0.1]),
      delayMinMs: 1,
      delayMaxMs,
      longDelayMaxMs: prng.between(delayMaxMs, 150),
    },
    crashRatePerTick: prng.pick([0, 0.005, 0.01, 0.03]),
    partitionRatePerTick: prng.pick([0, 0.01, 0.02, 0.04]),
    downtimeMaxTicks: prng.between(3, 60),
    partitionMaxTicks: prng.between(5, 80),
    pauseRatePerTick: prng.pick([0, 0.005, 0.02]),
    pauseMaxTicks: prng.between(5, 40),
    transferRatePerTick: prng.pick([0, 0, 0.005, 0.02]),
    node: {
      electionTick: 10,
      heartbeatTick: prng.pick([1, 2, 3]),
      maxInflightMsgs: prng.pick([1, 4, 256]),
      maxSizePerMsgBytes: prng.pick([256, 1024 * 1024]),
      maxUncommittedEntriesSizeBytes: prng.pick([undefined, 100, 1000]),
      maxCommittedSizePerReadyBytes: prng.pick([undefined, 200]),
      fsyncMinMs: 0,
      fsyncMaxMs: prng.between(0, 4),
      snapshotIntervalEntries: prng.between(4, 40),
      compactionLagEntries: prng.between(0, 5),
      forwardToLeader: prng.chance(0.5),
    },
    clients: {
      clientCount: prng.between(2, 4),
      keys: ["a", "b", "c"].slice(0, prng.between(1, 3)),
      opTimeoutMs: prng.between(150, 400),
      randomTargetRate: prng.pick([0, 0.1, 0.3]),
      thinkMinMs: 0,
      thinkMaxMs: prng.between(10, 80),
      latencyMinMs: 1,
      latencyMaxMs: 3,
    },
  };
}

export interface SimulationOptions {
  /** Receives one line per event when given. */
  readonly trace?: (line: string) => void;
  /** Breaks the host on purpose, to show that the checks notice (see {@link HostSabotage}). */
  readonly sabotage?: HostSabotage;
}

export function runSimulation(seed: number, library: RaftLibrary, options: SimulationOptions = {}): SimulationReport {
  const { trace, sabotage = null } = options;
  const prng = new Prng(seed);
  const scenario = drawScenario(prng);
  const queue = new EventQueue();
  let nowMs = 0;
  const traceLine = trace === undefined ? () => {} : (line: string) => trace(`${String(nowMs).padStart(6)} ms  ${line}`);
  const schedule = (delayMs: number, run: () => void): void => queue.schedule(nowMs + delayMs, run);
  const monitor = new SafetyMonitor();
  const ids: NodeId[] = Array.from({ length: scenario.nodeCount + scenario.spareCount }, (_, i) => `n${i + 1}`);
  const initialVoters = ids.slice(0, scenario.nodeCount);
  const initialConfState: ConfState = { voters: initialVoters, learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false };
  const outsiderConfState: ConfState = { voters: [], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false };
  const nodes = new Map<NodeId, SimNode>();
  const network: SimNetwork = new SimNetwork(queue, prng.fork(), () => nowMs, {
    deliver: (message) => nodes.get(message.to)?.receive(message) ?? false,
    reportSnapshot: (message, delivered) => {
      const from = nodes.get(message.from);
      if (from !== undefined) schedule(0, () => from.reportSnapshot(message.to, delivered));
    },
    reportUnreachable: (from, to) => nodes.get(from)?.reportUnreachable(to),
  });
  const send = (message: Message): void => {
    if (trace !== undefined) traceLine(`${message.from} → ${message.to} ${describeMessage(message)}`);
    network.send(message);
  };
  for (const id of ids) {
    nodes.set(
      id,
      new SimNode(id, {
        library,
        monitor,
        prng: prng.fork(),
        initialConfState: initialVoters.includes(id) ? initialConfState : outsiderConfState,
        sabotage,
        tuning: scenario.node,
        nowMs: () => nowMs,
        schedule,
        send,
        trace: traceLine,
      }),
    );
  }
  const nodeList = [...nodes.values()];
  const recorder = new HistoryRecorder();
  const clients = new SimClients({
    prng: prng.fork(),
    nodes: nodeList,
    recorder,
    tuning: scenario.clients,
    nowMs: () => nowMs,
    schedule,
    trace: traceLine,
  });
  const chaos = prng.fork();
  let partitions = 0;
  let transfers = 0;
  let confChanges = 0;
  /** Spares proposed for membership once; an id is never added again after it may have been removed. */
  const everProposed = new Set<NodeId>(initialVoters);
  let phase: "chaos" | "heal" | "drain" = "chaos";

  const injectFaults = (): void => {
    if (chaos.chance(scenario.crashRatePerTick)) {
      const alive = nodeList.filter((n) => n.alive);
      if (alive.length > 0) {
        const leader = alive.find((n) => n.soft.role === "leader");
        const victim = leader !== undefined && chaos.chance(0.5) ? leader : chaos.pick(alive);
        victim.crash();
        schedule(chaos.between(1, scenario.downtimeMaxTicks) * tickIntervalMs, () => {
          if (!victim.alive) victim.start();
        });
      }
    }
    if (chaos.chance(scenario.pauseRatePerTick)) {
      const alive = nodeList.filter((n) => n.alive && !n.paused);
      const leader = alive.find((n) => n.soft.role === "leader");
      const victim = leader !== undefined && chaos.chance(0.5) ? leader : alive.length > 0 ? chaos.pick(alive) : undefined;
      victim?.pause(chaos.between(1, scenario.pauseMaxTicks) * tickIntervalMs);
    }
    if (chaos.chance(scenario.transferRatePerTick)) {
      const leader = nodeList.find((n) => n.alive && n.soft.role === "leader");
      if (leader !== undefined) {
        transfers++;
        leader.transferLeadership(chaos.pick(nodeList.filter((n) => n !== leader)).id);
      }
    }
    if (chaos.chance(scenario.reconfigureRatePerTick)) {
      const leader = nodeList.find((n) => n.alive && !n.paused && n.soft.role === "leader");
      const change = leader === undefined ? null : drawConfChange(chaos, leader.appliedConfState, ids, everProposed);
      if (leader !== undefined && change !== null && leader.proposeConfChange(change)) {
        confChanges++;
        for (const single of change.changes) everProposed.add(single.nodeId);
        traceLine(`${leader.id} proposed conf change ${JSON.stringify(change.changes)}`);
      }
    }
    if (chaos.chance(scenario.partitionRatePerTick)) {
      partitions++;
      const description = partitionNetwork(chaos, network, nodeList);
      traceLine(`partition: ${description} (cut: ${network.describeCuts()})`);
      schedule(chaos.between(1, scenario.partitionMaxTicks) * tickIntervalMs, () => {
        if (phase !== "chaos") return;
        network.healAll();
        traceLine("network healed");
      });
    }
  };

  const heal = (): void => {
    phase = "heal";
    network.faults = calmNetwork;
    network.healAll();
    for (const node of nodeList) if (!node.alive) node.start();
    traceLine("heal: network repaired, every node running");
  };

  const drawFaults = (): void => {
    if (phase === "chaos") injectFaults();
    schedule(tickIntervalMs, drawFaults);
  };
  const startTicking = (node: SimNode, intervalMs: number): void => {
    const tick = (): void => {
      node.tick();
      schedule(intervalMs, tick);
    };
    schedule(intervalMs, tick);
  };

  const chaosEndMs = chaosTicks * tickIntervalMs;
  const healEndMs = chaosEndMs + healTicks * tickIntervalMs;
  const endMs = healEndMs + scenario.clients.opTimeoutMs + drainExtraTicks * tickIntervalMs;
  let failure: SimulationReport["failure"];
  let events = 0;
  try {
    network.faults = scenario.faults;
    for (const node of nodeList) node.start();
    nodeList.forEach((node, i) => startTicking(node, scenario.nodeTickIntervalsMs[i]));
    schedule(tickIntervalMs, drawFaults);
    clients.start();
    queue.schedule(chaosEndMs, heal);
    queue.schedule(healEndMs, () => {
      phase = "drain";
      clients.stop();
    });
    while (queue.size > 0 && queue.peekTimeMs() <= endMs) {
      const event = queue.pop();
      if (event === undefined) break;
      nowMs = event.atMs;
      event.run();
      if (++events > eventsPerRunMax) throw new Error(`more than ${eventsPerRunMax} events in one run`);
    }
    failure = checkConvergence(nodeList);
  } catch (error) {
    if (error instanceof SafetyViolation) failure = { kind: "safety", message: error.message };
    else failure = { kind: "exception", message: error instanceof Error ? (error.stack ?? error.message) : String(error) };
  }
  if (failure === null) {
    const result = checkLinearizable(recorder.history(), { timeoutMs: checkerTimeoutMs });
    if (result.ok === false) failure = { kind: "linearizability", message: result.explanation };
    else if (result.ok === "unknown") {
      failure = { kind: "checker-timeout", message: `no verdict within ${checkerTimeoutMs} ms` };
    }
  }
  return {
    seed,
    scenario,
    failure,
    stats: {
      virtualMs: nowMs,
      events,
      leaderElections: monitor.leaderElections,
      crashes: sum(nodeList, (n) => n.crashes),
      lostWrites: sum(nodeList, (n) => n.lostWrites),
      partitions,
      confChanges,
      pauses: sum(nodeList, (n) => n.pauses),
      transfers,
      snapshotsTaken: sum(nodeList, (n) => n.snapshotsTaken),
      snapshotsInstalled: sum(nodeList, (n) => n.snapshotsInstalled),
      committedIndex: monitor.knownCommittedIndex,
      network: network.stats,
      clients: clients.stats,
    },
  };
}

/**
 * After healing, exactly one node leads, and every member of its configuration holds the same
 * applied state (nodes removed or never added are left out).
 */
function checkConvergence(nodes: readonly SimNode[]): SimulationReport["failure"] {
  const leaders = nodes.filter((n) => n.soft.role === "leader");
  const states = nodes.map(
    (n) => `${n.id}: ${n.alive ? `applied ${n.appliedIndex}, role ${n.soft.role}` : "down"}, config ${describeConf(n.appliedConfState)}`,
  );
  if (leaders.length !== 1) {
    return { kind: "liveness", message: `${leaders.length} leaders after healing (${states.join("; ")})` };
  }
  const config = leaders[0].appliedConfState;
  const members = new Set([...config.voters, ...config.learners, ...config.votersOutgoing, ...config.learnersNext]);
  const applied = new Set(nodes.filter((n) => members.has(n.id)).map((n) => `${n.appliedIndex} ${n.fingerprint}`));
  if (applied.size !== 1) {
    return { kind: "liveness", message: `members did not converge after healing (${states.join("; ")})` };
  }
  return null;
}

function describeConf(cs: ConfState): string {
  const parts = [`voters ${cs.voters.join(",") || "-"}`];
  if (cs.learners.length > 0) parts.push(`learners ${cs.learners.join(",")}`);
  if (cs.votersOutgoing.length > 0) parts.push(`outgoing ${cs.votersOutgoing.join(",")}`);
  if (cs.learnersNext.length > 0) parts.push(`learners-next ${cs.learnersNext.join(",")}`);
  return `[${parts.join("; ")}]`;
}

/**
 * A membership change the leader could propose given its applied configuration: add a spare as a
 * learner or a voter, promote a learner, remove a learner or a voter (the leader included), or
 * replace a voter by a spare in one joint change. Voters never drop below two. Null when nothing
 * fits (e.g. while a joint configuration is being left).
 */
function drawConfChange(prng: Prng, cs: ConfState, ids: readonly NodeId[], everProposed: ReadonlySet<NodeId>): ConfChange | null {
  if (cs.votersOutgoing.length > 0) return null;
  const spares = ids.filter((id) => !everProposed.has(id));
  const options: (() => ConfChange | null)[] = [
    () => (spares.length === 0 ? null : { changes: [{ type: ConfChangeType.AddLearner, nodeId: prng.pick(spares) }] }),
    () => (spares.length === 0 ? null : { changes: [{ type: ConfChangeType.AddVoter, nodeId: prng.pick(spares) }] }),
    () => (cs.learners.length === 0 ? null : { changes: [{ type: ConfChangeType.AddVoter, nodeId: prng.pick(cs.learners) }] }),
    () => (cs.learners.length === 0 ? null : { changes: [{ type: ConfChangeType.RemoveNode, nodeId: prng.pick(cs.learners) }] }),
    () => (cs.voters.length <= 2 ? null : { changes: [{ type: ConfChangeType.RemoveNode, nodeId: prng.pick(cs.voters) }] }),
    () =>
      spares.length === 0
        ? null
        : {
            changes: [
              { type: ConfChangeType.AddVoter, nodeId: prng.pick(spares) },
              { type: ConfChangeType.RemoveNode, nodeId: prng.pick(cs.voters) },
            ],
          },
  ];
  return prng.pick(options)();
}

function partitionNetwork(prng: Prng, network: SimNetwork, nodes: readonly SimNode[]): string {
  const ids = nodes.map((n) => n.id);
  const leader = nodes.find((n) => n.alive && n.soft.role === "leader")?.id ?? prng.pick(ids);
  switch (prng.int(4)) {
    case 0: {
      const shuffled = prng.shuffle([...ids]);
      const side = new Set(shuffled.slice(0, prng.between(1, ids.length - 1)));
      for (const a of ids) for (const b of ids) if (side.has(a) !== side.has(b)) network.cut(a, b);
      return `split {${[...side].sort().join(",")}} from the rest`;
    }
    case 1:
      for (const other of ids) {
        if (other === leader) continue;
        network.cut(leader, other);
        network.cut(other, leader);
      }
      return `isolate ${leader}`;
    case 2:
      for (const other of ids) if (other !== leader) network.cut(other, leader);
      return `${leader} hears nobody (one-way)`;
    default: {
      const links = prng.between(1, ids.length);
      for (let i = 0; i < links; i++) {
        const from = prng.pick(ids);
        const to = prng.pick(ids.filter((id) => id !== from));
        network.cut(from, to);
      }
      return `${links} random one-way cuts`;
    }
  }
}

function describeMessage(m: Message): string {
  const parts = [`${m.type} t${m.term}`];
  if (m.index !== 0 || m.logTerm !== 0) parts.push(`i${m.index}/lt${m.logTerm}`);
  if (m.entries.length > 0) parts.push(`entries ${m.entries[0].index}..${m.entries[m.entries.length - 1].index}`);
  if (m.commit !== 0) parts.push(`commit ${m.commit}`);
  if (m.reject) parts.push(`reject hint ${m.rejectHint}`);
  if (m.snapshot !== null) parts.push(`snapshot ${m.snapshot.metadata.index}/t${m.snapshot.metadata.term}`);
  return parts.join(" ");
}

function sum<T>(items: readonly T[], of: (item: T) => number): number {
  return items.reduce((total, item) => total + of(item), 0);
}

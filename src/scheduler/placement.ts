/**
 * Placement: which node (and which port) a new instance of a group gets. Pure: nodes and a
 * {@link PlacementIndex} of the existing instances in, a {@link Placement} or a typed
 * {@link PlacementFailure} out. The index is built once from the instance list and updated with
 * every placement, so one decision costs O(nodes + ports tried) and never scans the instances.
 *
 * Rules (docs/decisions/scheduler.md, "Placement"):
 * - only ONLINE nodes that are not cordoned and not shutting down (their daemon announced a graceful
 *   shutdown) are candidates;
 * - free memory = totalMemoryMb − max(reserved by live instances, usedMemoryMb the daemon reports)
 *   must be at least the group's memoryMb;
 * - the port is the lowest one of the group's portRange not used by a live instance on that node;
 * - among candidates: fewest live instances of the group first, then most free memory, then the
 *   smallest node id (deterministic).
 */
import type { Group } from "../domain/groups/group-schemas.js";
import type { InstanceFields } from "../domain/instances/instance-service.js";
import { FINISHED_STATES } from "../domain/instances/instance-schemas.js";
import type { NodeRecord } from "../domain/nodes/node-schemas.js";

/** What placement needs of a group. */
export type PlacementGroup = Pick<Group, "name" | "memoryMb" | "portRange">;

/** What placement needs of a node. */
export type PlacementNode = Pick<NodeRecord, "id" | "state" | "cordoned" | "shuttingDown" | "totalMemoryMb" | "usedMemoryMb">;

/** What placement needs of an existing instance. */
export type PlacementInstance = Pick<InstanceFields, "group" | "node" | "port" | "memoryMb" | "state">;

/** One placement decision to make. */
export interface PlacementRequest {
  group: PlacementGroup;
  /**
   * Nodes already starting as many instances as they may at once (start pacing): they take no new
   * instance now. When only such nodes could take it, the result is START_SLOTS_BUSY, a wait and
   * not a scheduling issue.
   */
  startSlotsFull?: (nodeId: string) => boolean;
}

/** Where the new instance goes. */
export interface Placement {
  ok: true;
  nodeId: string;
  port: number;
  /** Free memory of the node before this instance, for the decision log. */
  freeMemoryMb: number;
}

/** Why no node could take the instance; `message` is what the group record shows operators. */
export type PlacementFailure =
  | { ok: false; code: "NO_ONLINE_NODE"; message: string; nodesByState: Record<string, number> }
  | { ok: false; code: "ALL_CORDONED"; message: string; cordonedNodes: number }
  | { ok: false; code: "NODES_SHUTTING_DOWN"; message: string; shuttingDownNodes: number }
  | { ok: false; code: "INSUFFICIENT_MEMORY"; message: string; neededMb: number; largestFreeMb: number; largestFreeNodeId: string }
  | { ok: false; code: "PORTS_EXHAUSTED"; message: string; portStart: number; portEnd: number; candidateNodes: number }
  | { ok: false; code: "START_SLOTS_BUSY"; message: string; busyNodes: number };

/** The outcome of {@link placeInstance}. */
export type PlacementResult = Placement | PlacementFailure;

interface NodeUsage {
  /** The machine the node's ports are counted under (see {@link PlacementIndex.rehost}). */
  host: string;
  reservedMemoryMb: number;
  /** Instances per port (a claim refused for a port briefly sits beside the reservation that holds it). */
  ports: Map<number, number>;
  instancesByGroup: Map<string, number>;
}

/**
 * Per-node reservations of the live (neither STOPPED nor CRASHED) instances: reserved memory, ports
 * in use and instance counts per group. Build it once with {@link buildPlacementIndex}, then
 * {@link PlacementIndex.add} each placement made and {@link PlacementIndex.remove} each instance that
 * finished, instead of rebuilding.
 */
export class PlacementIndex {
  private readonly usage = new Map<string, NodeUsage>();
  /** Instances per port per machine: the ports of every node of the machine together. */
  private readonly hostPorts = new Map<string, Map<number, number>>();

  /**
   * `hostOf` names the machine of a node (by default every node is its own machine): nodes on one
   * machine (several daemons on one host) share its ports. A node's ports are counted under the
   * machine `hostOf` named when its first instance was added; call {@link rehost} when it learns
   * another one later (a port check of the node itself moves them too).
   */
  constructor(private readonly hostOf: (nodeId: string) => string = (nodeId) => nodeId) {}

  /** Records a live instance. */
  add(instance: PlacementInstance): void {
    if (FINISHED_STATES.has(instance.state)) return;
    const u = this.usageOf(instance.node);
    u.reservedMemoryMb += instance.memoryMb;
    u.ports.set(instance.port, (u.ports.get(instance.port) ?? 0) + 1);
    countPort(this.portsOfHost(u.host), instance.port, 1);
    u.instancesByGroup.set(instance.group, (u.instancesByGroup.get(instance.group) ?? 0) + 1);
  }

  /** Forgets an instance that finished or was deleted (the same fields it was added with). */
  remove(instance: PlacementInstance): void {
    const u = this.usage.get(instance.node);
    if (!u) return;
    u.reservedMemoryMb -= instance.memoryMb;
    countPort(u.ports, instance.port, -1);
    countPort(this.portsOfHost(u.host), instance.port, -1);
    const left = (u.instancesByGroup.get(instance.group) ?? 0) - 1;
    if (left > 0) u.instancesByGroup.set(instance.group, left);
    else u.instancesByGroup.delete(instance.group);
  }

  /** Memory reserved on `nodeId` by live instances. */
  reservedMemoryMb(nodeId: string): number {
    return this.usage.get(nodeId)?.reservedMemoryMb ?? 0;
  }

  /** Live instances of `group` on `nodeId`. */
  groupCount(nodeId: string, group: string): number {
    return this.usage.get(nodeId)?.instancesByGroup.get(group) ?? 0;
  }

  /** Whether a live instance on `nodeId`'s machine uses `port`. */
  portUsed(nodeId: string, port: number): boolean {
    this.rehost(nodeId);
    if (this.usage.get(nodeId)?.ports.has(port)) return true;
    return this.hostPorts.get(this.hostOf(nodeId))?.has(port) ?? false;
  }

  /** The node's machine changed (`hostOf` names another now): its ports count there from now on. */
  rehost(nodeId: string): void {
    const u = this.usage.get(nodeId);
    const host = this.hostOf(nodeId);
    if (!u || u.host === host) return;
    for (const [port, count] of u.ports) {
      countPort(this.portsOfHost(u.host), port, -count);
      countPort(this.portsOfHost(host), port, count);
    }
    u.host = host;
  }

  private usageOf(nodeId: string): NodeUsage {
    let u = this.usage.get(nodeId);
    if (!u) {
      u = { host: this.hostOf(nodeId), reservedMemoryMb: 0, ports: new Map(), instancesByGroup: new Map() };
      this.usage.set(nodeId, u);
    }
    return u;
  }

  private portsOfHost(host: string): Map<number, number> {
    let ports = this.hostPorts.get(host);
    if (!ports) {
      ports = new Map();
      this.hostPorts.set(host, ports);
    }
    return ports;
  }
}

/** Adds `delta` instances to a port's count; a count of 0 removes the port. */
function countPort(ports: Map<number, number>, port: number, delta: number): void {
  const next = (ports.get(port) ?? 0) + delta;
  if (next > 0) ports.set(port, next);
  else ports.delete(port);
}

/** Builds the index of `instances` (finished ones are skipped). */
export function buildPlacementIndex(instances: Iterable<PlacementInstance>): PlacementIndex {
  const index = new PlacementIndex();
  for (const instance of instances) index.add(instance);
  return index;
}

/** Free memory of a node for placement: total minus the larger of reservations and reported use. */
export function freeMemoryMb(node: PlacementNode, index: PlacementIndex): number {
  return node.totalMemoryMb - Math.max(index.reservedMemoryMb(node.id), node.usedMemoryMb);
}

/** The lowest port of `group.portRange` unused on `nodeId`, or null when the range is exhausted. */
export function lowestFreePort(group: PlacementGroup, nodeId: string, index: PlacementIndex): number | null {
  for (let port = group.portRange.start; port <= group.portRange.end; port++) {
    if (!index.portUsed(nodeId, port)) return port;
  }
  return null;
}

/**
 * Chooses a node and port for one new instance of `request.group`, or explains why none fits.
 * Does not modify `existing`: the caller adds the placement once it has recorded the instance.
 */
export function placeInstance(request: PlacementRequest, nodes: readonly PlacementNode[], existing: PlacementIndex): PlacementResult {
  const group = request.group;
  const nodesByState: Record<string, number> = {};
  let online = 0;
  let cordoned = 0;
  let shuttingDown = 0;
  let largestFreeMb = -Infinity;
  let largestFreeNodeId = "";
  // Memory-eligible candidates; usually one pass picks the best and its port is free.
  const candidates: { node: PlacementNode; count: number; freeMb: number }[] = [];
  for (const node of nodes) {
    nodesByState[node.state] = (nodesByState[node.state] ?? 0) + 1;
    if (node.state !== "ONLINE") continue;
    online++;
    if (node.cordoned) {
      cordoned++;
      continue;
    }
    if (node.shuttingDown === true) {
      shuttingDown++;
      continue;
    }
    const freeMb = freeMemoryMb(node, existing);
    if (freeMb > largestFreeMb || (freeMb === largestFreeMb && node.id < largestFreeNodeId)) {
      largestFreeMb = freeMb;
      largestFreeNodeId = node.id;
    }
    if (freeMb < group.memoryMb) continue;
    candidates.push({ node, count: existing.groupCount(node.id, group.name), freeMb });
  }
  if (online === 0) {
    const others = Object.entries(nodesByState)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([state, n]) => `${n} ${state}`)
      .join(", ");
    return { ok: false, code: "NO_ONLINE_NODE", message: others ? `no ONLINE node (${others})` : "no ONLINE node (no node registered)", nodesByState };
  }
  if (cordoned === online) {
    return { ok: false, code: "ALL_CORDONED", message: `every ONLINE node is cordoned (${cordoned})`, cordonedNodes: cordoned };
  }
  if (cordoned + shuttingDown === online) {
    const cordonedToo = cordoned > 0 ? `, ${cordoned} cordoned` : "";
    return {
      ok: false,
      code: "NODES_SHUTTING_DOWN",
      message: `every ONLINE node is shutting down or cordoned (${shuttingDown} shutting down${cordonedToo})`,
      shuttingDownNodes: shuttingDown,
    };
  }
  if (candidates.length === 0) {
    return {
      ok: false,
      code: "INSUFFICIENT_MEMORY",
      message: `insufficient memory: needs ${group.memoryMb} MB, largest free ${Math.max(0, largestFreeMb)} MB on ${largestFreeNodeId}`,
      neededMb: group.memoryMb,
      largestFreeMb: Math.max(0, largestFreeMb),
      largestFreeNodeId,
    };
  }
  // Select the best remaining candidate; drop it and retry only when its port range is exhausted.
  // A candidate whose start slots are full is set aside: it could take the instance later.
  const memoryFit = candidates.length;
  let busyNodes = 0;
  while (candidates.length > 0) {
    let best = 0;
    for (let i = 1; i < candidates.length; i++) {
      if (better(candidates[i], candidates[best])) best = i;
    }
    const chosen = candidates[best];
    const port = lowestFreePort(group, chosen.node.id, existing);
    if (port !== null) {
      if (!request.startSlotsFull?.(chosen.node.id)) return { ok: true, nodeId: chosen.node.id, port, freeMemoryMb: chosen.freeMb };
      busyNodes++;
    }
    candidates[best] = candidates[candidates.length - 1];
    candidates.pop();
  }
  if (busyNodes > 0) {
    return {
      ok: false,
      code: "START_SLOTS_BUSY",
      message: `every node that could take it is starting its maximum of instances at once (${busyNodes})`,
      busyNodes,
    };
  }
  const { start, end } = group.portRange;
  return {
    ok: false,
    code: "PORTS_EXHAUSTED",
    message: `port range ${start}-${end} exhausted on every candidate node (${memoryFit})`,
    portStart: start,
    portEnd: end,
    candidateNodes: memoryFit,
  };
}

function better(a: { node: PlacementNode; count: number; freeMb: number }, b: { node: PlacementNode; count: number; freeMb: number }): boolean {
  if (a.count !== b.count) return a.count < b.count;
  if (a.freeMb !== b.freeMb) return a.freeMb > b.freeMb;
  return a.node.id < b.node.id;
}

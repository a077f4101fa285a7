/**
 * Instances: server processes scheduled into groups, served under /api/v1/services. The service owns
 * the `instances` collection (indexes on group, node and state). The scheduler of the group's scope
 * writes them, every write conditional on the revision it read ({@link InstanceService.update},
 * {@link InstanceService.saveIf}, {@link InstanceService.insertNew}, {@link InstanceService.removeIf});
 * the REST surface here is read-only.
 */
import type { Clock } from "../../shared/clock.js";
import { assert, notFound } from "../../shared/errors.js";
import type { Collection, Doc, DocumentStore, Filter, Revisioned } from "../../store/ports.js";
import { updateDocument, type UpdateDecision } from "../shared/conditional-update.js";
import type { GroupAggregateSource, GroupAggregates } from "../groups/group-service.js";
import { SingleFlight } from "../shared/single-flight.js";
import { FINISHED_STATES, INSTANCE_STATES, SERVING_STATES, type Instance, type InstanceListItem, type InstanceState } from "./instance-schemas.js";

/** Collection owned by {@link InstanceService}. */
export const INSTANCES_COLLECTION = "instances";

/** The fields of an instance document. */
export interface InstanceFields {
  id: string;
  group: string;
  node: string;
  state: InstanceState;
  port: number;
  playerCount: number;
  memoryMb: number;
  /** ISO 8601; null until the process started. */
  startedAt: string | null;
  /** ISO 8601; set once the process ended, freezing uptimeMs. */
  stoppedAt?: string | null;
  deploymentRevision: number;
  /**
   * Which start of the instance this record is about: a fresh id each time the scheduler records
   * the instance (a STATIC slot reuses its instance id, never its start id). Workload tokens name
   * it, and only the current start's tokens are accepted. Absent on records written before it
   * existed. Not shown by the REST routes.
   */
  startId?: string;
  /**
   * A stop the owner acknowledged (written before the acknowledgement, by the group's owner only,
   * fenced like its state writes): the owner that adopts the instance completes it, and a process
   * found gone is STOPPED, not CRASHED. Not shown by the REST routes.
   */
  stopRequested?: StopRequest;
}

/** The kind of a requested stop. */
export type StopRequest = "STOP" | "FORCE_STOP";

/** The stored instance document, keyed by instance id. */
export type StoredInstance = InstanceFields & Doc;

/** List filters; undefined or empty values are ignored. */
export interface InstanceFilter {
  group?: string;
  node?: string;
  state?: InstanceState;
}

/** Totals over the instances that are not finished, for the overview. */
export interface InstanceTotals {
  instanceCount: number;
  playerCount: number;
}

/** Reads instances, and computes the per-group and per-node aggregates other services show. */
export class InstanceService implements GroupAggregateSource {
  private readonly instances: Collection<StoredInstance>;
  private readonly findFlights = new SingleFlight<StoredInstance[]>();
  private readonly listFlights = new SingleFlight<InstanceListItem[]>();

  constructor(
    store: DocumentStore,
    private readonly clock: Clock,
  ) {
    this.instances = store.collection<StoredInstance>(INSTANCES_COLLECTION, {
      indexes: [
        { name: "instances_group", field: "group" },
        { name: "instances_node", field: "node" },
        { name: "instances_state", field: "state" },
      ],
    });
  }

  /**
   * Instances matching every given filter, in list form, ordered by id. Concurrent identical calls
   * may receive the same array (see {@link SingleFlight}); callers must not mutate it.
   */
  list(filter: InstanceFilter = {}): Promise<readonly InstanceListItem[]> {
    const storeFilter = toStoreFilter(filter);
    return this.listFlights.run(JSON.stringify(storeFilter), () => this.readList(storeFilter));
  }

  private async readList(filter: Filter): Promise<InstanceListItem[]> {
    const docs = await this.instances.find(filter);
    const nowMs = this.clock.nowMs();
    return docs.map((doc) => ({
      id: doc.id,
      group: doc.group,
      node: doc.node,
      state: doc.state,
      port: doc.port,
      playerCount: doc.playerCount,
      uptimeMs: uptimeMs(doc, nowMs),
      startedAt: doc.startedAt,
      deploymentRevision: doc.deploymentRevision,
    }));
  }

  /** One instance; 404 `Instance not found: <id>` when unknown. */
  async get(id: string): Promise<Instance> {
    const doc = await this.instances.get(id);
    if (!doc) throw notFound(`Instance not found: ${id}`);
    return {
      id: doc.id,
      group: doc.group,
      node: doc.node,
      state: doc.state,
      port: doc.port,
      playerCount: doc.playerCount,
      memoryMb: doc.memoryMb,
      uptimeMs: uptimeMs(doc, this.clock.nowMs()),
      startedAt: doc.startedAt,
      deploymentRevision: doc.deploymentRevision,
    };
  }

  /**
   * Inserts or replaces an instance document whatever is stored: seeding (tests, tools), never the
   * scheduler, whose writes are conditional. A malformed document fails an assertion.
   */
  async save(instance: InstanceFields): Promise<void> {
    await this.instances.put(stored(instance));
  }

  /** Replaces the record only at revision `rev` (RevisionConflictError otherwise); answers the new revision. */
  saveIf(instance: InstanceFields, rev: string): Promise<string> {
    return this.instances.putIf(stored(instance), rev);
  }

  /** Records a new instance (DuplicateKeyError when the id exists); answers its revision. */
  insertNew(instance: InstanceFields): Promise<string> {
    return this.instances.insert(stored(instance));
  }

  /**
   * Read-modify-write of one record as a compare-and-set: `decide` sees the stored record (and
   * checks the scope's fencing there, after the read), its `next` is written only at the revision
   * read; on a conflict all of it runs again on what is stored now (conditional-update.ts).
   */
  update<R>(id: string, decide: (current: StoredInstance | null) => Promise<UpdateDecision<StoredInstance, R>>): Promise<R> {
    return updateDocument(this.instances, id, async (current) => {
      const decision = await decide(current);
      return decision.next === null ? decision : { ...decision, next: stored(decision.next) };
    });
  }

  /** The stored document, or null (the scheduler's own reads). */
  getDoc(id: string): Promise<StoredInstance | null> {
    return this.instances.get(id);
  }

  /** The stored document with its revision, or null (what a conditional write starts from). */
  getRevisioned(id: string): Promise<Revisioned<StoredInstance> | null> {
    return this.instances.getRevisioned(id);
  }

  /** Stored documents matching the filter, with their revisions. */
  findRevisioned(filter: InstanceFilter = {}): Promise<Revisioned<StoredInstance>[]> {
    return this.instances.findRevisioned(toStoreFilter(filter));
  }

  /** Removes the record only at revision `rev` (RevisionConflictError otherwise). */
  removeIf(id: string, rev: string): Promise<void> {
    return this.instances.deleteIf(id, rev);
  }

  /** Stored documents matching the filter (the scheduler's own reads). */
  findDocs(filter: InstanceFilter = {}): Promise<StoredInstance[]> {
    return this.instances.find(toStoreFilter(filter));
  }

  /** Removes an instance document; true when it existed. */
  remove(id: string): Promise<boolean> {
    return this.instances.delete(id);
  }

  async aggregatesForGroup(group: string): Promise<GroupAggregates> {
    return aggregate(await this.instances.find({ group }));
  }

  async aggregatesByGroup(): Promise<Map<string, GroupAggregates>> {
    const byGroup = new Map<string, StoredInstance[]>();
    for (const doc of await this.findShared({})) {
      const list = byGroup.get(doc.group);
      if (list) list.push(doc);
      else byGroup.set(doc.group, [doc]);
    }
    return new Map([...byGroup].map(([group, docs]) => [group, aggregate(docs)]));
  }

  /** How many instance documents exist, whatever their state (metrics). */
  count(): Promise<number> {
    return this.instances.count();
  }

  /** Number of instances placed on each node (every state but STOPPED and CRASHED). */
  async liveCountByNode(): Promise<Map<string, number>> {
    const counts = new Map<string, number>();
    for (const doc of await this.findShared({})) {
      if (!FINISHED_STATES.has(doc.state)) counts.set(doc.node, (counts.get(doc.node) ?? 0) + 1);
    }
    return counts;
  }

  /** Number of live instances on one node. */
  async liveCountForNode(node: string): Promise<number> {
    const docs = await this.instances.find({ node });
    return docs.filter((doc) => !FINISHED_STATES.has(doc.state)).length;
  }

  /** Instances that are not STOPPED or CRASHED, and the players on them. */
  async liveTotals(): Promise<InstanceTotals> {
    let instanceCount = 0;
    let playerCount = 0;
    for (const doc of await this.findShared({})) {
      if (FINISHED_STATES.has(doc.state)) continue;
      instanceCount += 1;
      playerCount += doc.playerCount;
    }
    return { instanceCount, playerCount };
  }

  /** Concurrent identical reads share one store query. */
  private findShared(filter: Filter): Promise<StoredInstance[]> {
    return this.findFlights.run(JSON.stringify(filter), () => this.instances.find(filter));
  }
}

/** The stored form of an instance; a malformed one is a bug of the caller, so it fails an assertion. */
function stored(instance: InstanceFields): StoredInstance {
  assert(instance.id.length > 0 && instance.group.length > 0, "instance needs an id and a group");
  assert(INSTANCE_STATES.includes(instance.state), `unknown instance state ${instance.state}`);
  assert(Number.isInteger(instance.port) && instance.port >= 0 && instance.port <= 65535, `bad port ${instance.port}`);
  assert(Number.isInteger(instance.playerCount) && instance.playerCount >= 0, `bad playerCount ${instance.playerCount}`);
  return { ...instance, _id: instance.id };
}

function toStoreFilter(filter: InstanceFilter): Filter {
  const out: Filter = {};
  if (filter.group) out.group = filter.group;
  if (filter.node) out.node = filter.node;
  if (filter.state) out.state = filter.state;
  return out;
}

function aggregate(docs: readonly StoredInstance[]): GroupAggregates {
  let runningInstances = 0;
  let totalPlayers = 0;
  for (const doc of docs) {
    if (!SERVING_STATES.has(doc.state)) continue;
    runningInstances += 1;
    totalPlayers += doc.playerCount;
  }
  return { runningInstances, totalPlayers };
}

function uptimeMs(doc: StoredInstance, nowMs: number): number {
  if (!doc.startedAt) return 0;
  const endMs = doc.stoppedAt ? Date.parse(doc.stoppedAt) : nowMs;
  return Math.max(0, endMs - Date.parse(doc.startedAt));
}

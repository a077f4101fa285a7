/**
 * The scope supervisor: one per lease-owned scope (a set of groups; on the development profile one
 * scope holds every group). While the scope is owned it runs a group actor per group and an
 * instance actor per live instance of those groups; when the scope is lost it stops every child at
 * once, in one transition, so nothing acts on a group another controller may now own.
 *
 * Stopping an actor stops supervision, not the process: the instance keeps running on its node and
 * the next owner adopts it (the instance machine's CREATED state). Children are spawned from the
 * actor logic named `group` and `instance`; src/ provides both with their effects already provided.
 * Events for a child are routed by group name or instance id; events for children not running are
 * dropped (the scope is not ours, or the child already finished).
 */
import { assign, enqueueActions, setup, type AnyActorRef } from "xstate";
import { groupMachine, type GroupTimings } from "../group/group-machine.js";
import type { GroupEvent } from "../group/transitions.js";
import { instanceMachine, type InstanceTimeouts } from "../instance/instance-machine.js";
import type { InstanceAdoptableState, InstanceEvent } from "../instance/transitions.js";

/** A group of the scope, as its record says. */
export interface ScopeGroup {
  group: string;
  maintenance?: boolean;
  paused?: boolean;
  /** Loop timings other than the defaults (the host's configuration). */
  timings?: Partial<GroupTimings>;
}

/** A live instance of the scope, as its record says. */
export interface ScopeInstance {
  instanceId: string;
  group: string;
  node: string;
  /** Omitted for an instance the scheduler just created. */
  adoptState?: InstanceAdoptableState;
  /** Bounded waits other than the defaults (the host's configuration). */
  timeouts?: Partial<InstanceTimeouts>;
}

/** Events of a supervisor. */
export type SupervisorEvent =
  /** The lease was acquired: adopt the scope's groups and live instances. */
  | { type: "SCOPE_ACQUIRED"; fencingToken: number; groups: readonly ScopeGroup[]; instances: readonly ScopeInstance[] }
  /** The lease was lost or released (or could not be renewed in time). */
  | { type: "SCOPE_LOST" }
  | { type: "GROUP_ADDED"; group: ScopeGroup }
  | { type: "GROUP_REMOVED"; group: string }
  | { type: "INSTANCE_ADDED"; instance: ScopeInstance }
  /** An instance actor reached STOPPED or CRASHED (the host observed it): let it go. */
  | { type: "INSTANCE_FINISHED"; instanceId: string }
  | { type: "TO_GROUP"; group: string; event: GroupEvent }
  | { type: "TO_INSTANCE"; instanceId: string; event: InstanceEvent };

/** What a supervisor is started with. */
export interface SupervisorInput {
  /** The lease name, e.g. `groups` on development or `group:<name>` with per-group leases. */
  scope: string;
}

/** The supervisor's context. */
export interface SupervisorContext {
  scope: string;
  /** The lease's fencing token while owned, null otherwise; effects stamp daemon commands with it. */
  fencingToken: number | null;
  groups: string[];
  /** Instance id → group name, for the instance actors running. */
  instances: Record<string, string>;
}

/** Child actor id of a group actor. */
export const groupChildId = (group: string) => `group:${group}`;
/** Child actor id of an instance actor. */
export const instanceChildId = (instanceId: string) => `instance:${instanceId}`;

/** The supervisor machine. Effects: reportScopeAcquired, reportScopeLost. */
export const supervisorMachine = setup({
  types: {
    context: {} as SupervisorContext,
    events: {} as SupervisorEvent,
    input: {} as SupervisorInput,
  },
  actors: {
    group: groupMachine,
    instance: instanceMachine,
  },
  actions: {
    reportScopeAcquired: () => {},
    reportScopeLost: () => {},
    adoptScope: enqueueActions(({ event, enqueue }) => {
      if (event.type !== "SCOPE_ACQUIRED") return;
      const instances: Record<string, string> = {};
      for (const g of event.groups) {
        enqueue.spawnChild("group", { id: groupChildId(g.group), input: { group: g.group, maintenance: g.maintenance, paused: g.paused, timings: g.timings } });
      }
      for (const i of event.instances) {
        instances[i.instanceId] = i.group;
        enqueue.spawnChild("instance", {
          id: instanceChildId(i.instanceId),
          input: { instanceId: i.instanceId, group: i.group, node: i.node, adoptState: i.adoptState, timeouts: i.timeouts },
        });
      }
      enqueue.assign({ fencingToken: event.fencingToken, groups: event.groups.map((g) => g.group), instances });
    }),
    stopEveryChild: enqueueActions(({ context, enqueue }) => {
      for (const group of context.groups) enqueue.stopChild(groupChildId(group));
      for (const instanceId of Object.keys(context.instances)) enqueue.stopChild(instanceChildId(instanceId));
      enqueue.assign({ fencingToken: null, groups: [], instances: {} });
    }),
    addGroup: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== "GROUP_ADDED" || context.groups.includes(event.group.group)) return;
      const g = event.group;
      enqueue.spawnChild("group", { id: groupChildId(g.group), input: { group: g.group, maintenance: g.maintenance, paused: g.paused, timings: g.timings } });
      enqueue.assign({ groups: [...context.groups, g.group] });
    }),
    removeGroup: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== "GROUP_REMOVED" || !context.groups.includes(event.group)) return;
      enqueue.stopChild(groupChildId(event.group));
      enqueue.assign({ groups: context.groups.filter((g) => g !== event.group) });
    }),
    addInstance: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== "INSTANCE_ADDED" || event.instance.instanceId in context.instances) return;
      const i = event.instance;
      enqueue.spawnChild("instance", {
        id: instanceChildId(i.instanceId),
        input: { instanceId: i.instanceId, group: i.group, node: i.node, adoptState: i.adoptState, timeouts: i.timeouts },
      });
      // Updated in place: a scope may hold thousands of instances, and a copy per added instance
      // would make adopting or scaling up quadratic.
      enqueue.assign({ instances: ({ context: current }) => Object.assign(current.instances, { [i.instanceId]: i.group }) });
    }),
    releaseInstance: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== "INSTANCE_FINISHED" || !(event.instanceId in context.instances)) return;
      enqueue.stopChild(instanceChildId(event.instanceId));
      const instanceId = event.instanceId;
      enqueue.assign({
        instances: ({ context: current }) => {
          delete current.instances[instanceId];
          return current.instances;
        },
      });
    }),
    routeToGroup: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== "TO_GROUP" || !context.groups.includes(event.group)) return;
      enqueue.sendTo(groupChildId(event.group), event.event);
    }),
    routeToInstance: enqueueActions(({ context, event, enqueue }) => {
      if (event.type !== "TO_INSTANCE" || !(event.instanceId in context.instances)) return;
      enqueue.sendTo(instanceChildId(event.instanceId), event.event);
    }),
  },
}).createMachine({
  id: "supervisor",
  context: ({ input }) => ({ scope: input.scope, fencingToken: null, groups: [], instances: {} }),
  initial: "RELEASED",
  states: {
    RELEASED: {
      on: { SCOPE_ACQUIRED: { target: "OWNING", actions: ["adoptScope", "reportScopeAcquired"] } },
    },
    OWNING: {
      on: {
        SCOPE_LOST: { target: "RELEASED", actions: ["stopEveryChild", "reportScopeLost"] },
        // A renewed lease with a new token (re-acquired after a short loss) keeps the children.
        SCOPE_ACQUIRED: { actions: assign({ fencingToken: ({ event }) => event.fencingToken }) },
        GROUP_ADDED: { actions: "addGroup" },
        GROUP_REMOVED: { actions: "removeGroup" },
        INSTANCE_ADDED: { actions: "addInstance" },
        INSTANCE_FINISHED: { actions: "releaseInstance" },
        TO_GROUP: { actions: "routeToGroup" },
        TO_INSTANCE: { actions: "routeToInstance" },
      },
    },
  },
});

/** The children of a supervisor snapshot, for hosts and tests. */
export function supervisedChildren(snapshot: { children: Record<string, AnyActorRef | undefined> }): AnyActorRef[] {
  return Object.values(snapshot.children).filter((c): c is AnyActorRef => c !== undefined);
}

/**
 * The effects of the actors/ machines, provided from src/ (STYLE item 6): each `provide*` function
 * takes a narrow port — what the daemon gateway, the stores and the event bus will implement — and
 * returns the machine with its named effects bound to it. No I/O here either: the ports do it.
 */
import { fromPromise } from "xstate";
import { groupMachine } from "../../actors/group/group-machine.js";
import type { EvaluationOutput } from "../../actors/group/transitions.js";
import { instanceMachine, type InstanceContext } from "../../actors/instance/instance-machine.js";
import { nodeMachine, type NodeContext } from "../../actors/node/node-machine.js";
import { supervisorMachine } from "../../actors/supervisor/supervisor-machine.js";

/** Which instance an effect is about. */
export interface InstanceRef {
  instanceId: string;
  group: string;
  node: string;
}

/** Why an instance crashed, as the crash record needs it. */
export type CrashCause = { kind: "EXIT"; exitCode: number } | { kind: "FAILURE"; reason: string };

/** What the instance actor's effects do. */
export interface InstanceEffectsPort {
  /** Prepare + start on the node's daemon (with the group's fencing token). */
  dispatch(instance: InstanceRef): void;
  stop(instance: InstanceRef): void;
  forceStop(instance: InstanceRef): void;
  announceDrain(instance: InstanceRef): void;
  /** Crash record, INSTANCE_CRASHED, crash-loop detector. */
  crashed(instance: InstanceRef, cause: CrashCause): void;
  /** The node was lost: replace, but do not count a crash. */
  lost(instance: InstanceRef): void;
  /** A bounded wait ran out; `delay` names it (e.g. `startTimeout`). Counts as a crash. */
  timedOut(instance: InstanceRef, delay: string): void;
  stopUnconfirmed(instance: InstanceRef): void;
}

const instanceRef = (context: InstanceContext): InstanceRef => ({ instanceId: context.instanceId, group: context.group, node: context.node });

/** The delay name of an xstate delayed event type, `xstate.after.<delay>.<state id>`. */
export function delayOfEvent(type: string): string {
  const parts = type.split(".");
  return parts[0] === "xstate" && parts[1] === "after" ? (parts[2] ?? type) : type;
}

/** The instance machine with its effects bound to `port`. */
export function provideInstanceEffects(port: InstanceEffectsPort) {
  return instanceMachine.provide({
    actions: {
      dispatch: ({ context }) => port.dispatch(instanceRef(context)),
      sendStop: ({ context }) => port.stop(instanceRef(context)),
      sendForceStop: ({ context }) => port.forceStop(instanceRef(context)),
      announceDrain: ({ context }) => port.announceDrain(instanceRef(context)),
      recordCrash: ({ context, event }) =>
        port.crashed(
          instanceRef(context),
          event.type === "EXITED"
            ? { kind: "EXIT", exitCode: event.exitCode }
            : { kind: "FAILURE", reason: event.type === "FAILED" ? event.reason : event.type },
        ),
      reportLost: ({ context }) => port.lost(instanceRef(context)),
      reportTimeout: ({ context, event }) => port.timedOut(instanceRef(context), delayOfEvent(event.type)),
      reportStopUnconfirmed: ({ context }) => port.stopUnconfirmed(instanceRef(context)),
    },
  });
}

/** What the node actor's effects do; every method gets the node id. */
export interface NodeEffectsPort {
  disconnected(nodeId: string): void;
  connected(nodeId: string): void;
  drainRequested(nodeId: string): void;
  drainCompleted(nodeId: string): void;
  cordonChanged(nodeId: string, cordoned: boolean): void;
  /** NODE_LOST to every instance actor on the node. */
  replaceInstances(nodeId: string): void;
}

/** The node machine with its effects bound to `port`. */
export function provideNodeEffects(port: NodeEffectsPort) {
  const id = (context: NodeContext) => context.nodeId;
  return nodeMachine.provide({
    actions: {
      reportDisconnected: ({ context }) => port.disconnected(id(context)),
      reportConnected: ({ context }) => port.connected(id(context)),
      announceDrain: ({ context }) => port.drainRequested(id(context)),
      announceDrainCompleted: ({ context }) => port.drainCompleted(id(context)),
      persistCordon: ({ context }) => port.cordonChanged(id(context), context.cordoned),
      replaceInstances: ({ context }) => port.replaceInstances(id(context)),
    },
  });
}

/** What the group actor's effects do. */
export interface GroupEffectsPort {
  /** One evaluation: decide (scaling.ts), place (placement.ts), record. Must honour `signal`. */
  evaluate(group: string, signal: AbortSignal): Promise<EvaluationOutput>;
  crashLoop(group: string, loop: { crashCount: number; windowStartMs: number }): void;
  resumed(group: string): void;
  stopInstances(group: string): void;
  evaluationFailed(group: string, error: unknown): void;
}

/** The group machine with its evaluation and effects bound to `port`. */
export function provideGroupEffects(port: GroupEffectsPort) {
  return groupMachine.provide({
    actors: {
      evaluate: fromPromise<EvaluationOutput, { group: string }>(({ input, signal }) => port.evaluate(input.group, signal)),
    },
    actions: {
      announceCrashLoop: ({ context, event }) =>
        port.crashLoop(
          context.group,
          event.type === "CRASH_LOOP" ? { crashCount: event.crashCount, windowStartMs: event.windowStartMs } : { crashCount: 0, windowStartMs: 0 },
        ),
      clearCrashLoop: ({ context }) => port.resumed(context.group),
      stopGroupInstances: ({ context }) => port.stopInstances(context.group),
      reportEvaluationFailed: ({ context, event }) =>
        port.evaluationFailed(context.group, "error" in event ? event.error : new Error(`evaluation timed out (${event.type})`)),
    },
  });
}

/** What a supervisor needs: its children's ports and the scope's own reports. */
export interface SupervisorPorts {
  instances: InstanceEffectsPort;
  groups: GroupEffectsPort;
  scopeAcquired(scope: string, fencingToken: number | null): void;
  scopeLost(scope: string): void;
}

/** A supervisor whose group and instance children have their effects bound. */
export function provideSupervisor(ports: SupervisorPorts) {
  return supervisorMachine.provide({
    actors: {
      group: provideGroupEffects(ports.groups),
      instance: provideInstanceEffects(ports.instances),
    },
    actions: {
      reportScopeAcquired: ({ context }) => ports.scopeAcquired(context.scope, context.fencingToken),
      reportScopeLost: ({ context }) => ports.scopeLost(context.scope),
    },
  });
}

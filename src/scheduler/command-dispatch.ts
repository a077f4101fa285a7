/**
 * Commands to daemons on behalf of the instance actors: start (with a workload token and the
 * instance spec), stop, force-stop, and the force-stop of a stray process; each stamped with the
 * fencing token of the group's scope, and sent only while the scope is owned. A daemon's answer
 * becomes an actor event where the actor needs one; a failure that may pass (not connected, a
 * timeout, a stale epoch) is left to the actor's dispatch timeout, which dispatches again.
 */
import type { InstanceEvent } from "../../actors/instance/transitions.js";
import type { GroupService } from "../domain/groups/group-service.js";
import type { InstanceService } from "../domain/instances/instance-service.js";
import { freezePoint } from "../shared/test-freeze.js";
import type { Logger } from "../logs/types.js";
import { conflict } from "../shared/errors.js";
import type { CommandResult, InstanceCommand } from "../wire/daemon-proto.js";
import type { InstanceRef } from "./actor-effects.js";
import type { RevisionSource } from "./instance-lifecycle.js";
import { buildInstanceSpec } from "./instance-spec.js";
import type { LiveInstances } from "./live-instances.js";
import type { SupervisedInstances } from "./supervised-instances.js";

/** Daemon error codes after which a dispatch is not retried: the instance fails at once. */
export const PERMANENT_DISPATCH_ERRORS: ReadonlySet<string> = new Set(["UNKNOWN_PLATFORM", "INVALID_PLATFORM", "INVALID_SPEC", "TOO_MANY_INSTANCES"]);
/**
 * The daemon's own placement check refused the start (its port or memory is taken on the node): the
 * instance never ran, so it ends STOPPED without a crash, and the group record says why.
 */
export const CAPACITY_REFUSALS: ReadonlySet<string> = new Set(["PORT_IN_USE", "INSUFFICIENT_MEMORY"]);

/** Commands to daemons: the daemon gateway (or the forwarding of several controllers), narrowed. */
export interface DaemonCommands {
  sendCommand(nodeId: string, command: InstanceCommand): Promise<CommandResult>;
}

/** The scheduler's credentials port: a start command carries a workload token for the start it names. */
export interface WorkloadTokens {
  issueWorkloadToken(identity: { instanceId: string; group: string; node: string }, startId?: string): { token: string };
}

export interface CommandDispatchDeps {
  daemons: DaemonCommands;
  instances: Pick<InstanceService, "getDoc">;
  groups: Pick<GroupService, "getDoc">;
  credentials: WorkloadTokens;
  /** Frozen revisions (deployments); without it every instance starts from its group record. */
  revisions?: Pick<RevisionSource, "specOf">;
  live: LiveInstances;
  supervised: SupervisedInstances;
  logger: Logger;
  /** The fencing token of the group's scope while this controller owns it, else null. */
  fencingTokenOf(group: string): number | null;
  toInstance(instanceId: string, event: InstanceEvent): void;
  /** The node refused the start for want of a port or memory ({@link CAPACITY_REFUSALS}): a scheduling issue, not a crash. */
  refusedByNode(ref: InstanceRef, code: string, message: string): void;
  track(work: Promise<unknown>): void;
}

/** Sends the instance actors' commands to the daemons. */
export class CommandDispatch {
  /** Instances whose last start dispatch failed for a reason that may pass: the actor sends it again. */
  private readonly retrying = new Set<string>();

  constructor(private readonly deps: CommandDispatchDeps) {}

  /** Starts waiting for another dispatch attempt (`cloud_workflows_start_retries`); forgets those no longer SCHEDULED. */
  startRetriesWaiting(): number {
    for (const id of this.retrying) if (this.deps.supervised.stateOf(id) !== "SCHEDULED") this.retrying.delete(id);
    return this.retrying.size;
  }

  /** Start on the node's daemon; the answer moves the actor (DISPATCHED, or FAILED for good). */
  async dispatch(ref: InstanceRef): Promise<void> {
    const [doc, group] = await Promise.all([this.deps.instances.getDoc(ref.instanceId), this.deps.groups.getDoc(ref.group)]);
    if (!doc || !group) {
      this.deps.toInstance(ref.instanceId, { type: "DISPATCHED" });
      this.deps.toInstance(ref.instanceId, { type: "FAILED", reason: !group ? `group ${ref.group} no longer exists` : "instance record missing" });
      return;
    }
    const fencingToken = this.deps.fencingTokenOf(ref.group);
    if (fencingToken === null) return;
    const revision = doc.deploymentRevision > 0 && this.deps.revisions ? await this.deps.revisions.specOf(doc.group, doc.deploymentRevision) : null;
    // The token names the start the record is about: tokens of the slot's earlier starts are refused.
    const token = this.deps.credentials.issueWorkloadToken({ instanceId: doc.id, group: doc.group, node: doc.node }, doc.startId);
    const result = await this.send(ref.node, {
      type: "start_instance",
      body: { group: ref.group, fencing_token: fencingToken, spec: buildInstanceSpec(group, doc, token.token, revision) },
    });
    const capacity = CAPACITY_REFUSALS.has(result.error_code);
    if (result.ok || result.error_code === "INSTANCE_EXISTS" || PERMANENT_DISPATCH_ERRORS.has(result.error_code) || capacity)
      this.retrying.delete(ref.instanceId);
    else {
      this.retrying.add(ref.instanceId);
      // Bounded by the instances supervised here: the ones that left SCHEDULED are dropped.
      if (this.retrying.size > this.deps.supervised.size) this.startRetriesWaiting();
    }
    if (result.ok || result.error_code === "INSTANCE_EXISTS") {
      this.deps.toInstance(ref.instanceId, { type: "DISPATCHED" });
    } else if (capacity) {
      this.deps.logger.warn(`Node ${ref.node} refused ${ref.instanceId}: ${result.error_code} ${result.message}`);
      this.deps.toInstance(ref.instanceId, { type: "STOP" });
      this.deps.refusedByNode(ref, result.error_code, result.message);
    } else if (PERMANENT_DISPATCH_ERRORS.has(result.error_code)) {
      this.deps.toInstance(ref.instanceId, { type: "DISPATCHED" });
      this.deps.toInstance(ref.instanceId, { type: "FAILED", reason: `${result.error_code}: ${result.message}` });
    } else {
      // Not connected, timed out, stale epoch: the actor's dispatch timeout sends it again.
      this.deps.logger.warn(`Dispatch of ${ref.instanceId} to ${ref.node} failed: ${result.error_code} ${result.message}`);
    }
  }

  /** The actor's stop or force-stop; a daemon that does not know the instance completes the stop. */
  async stop(ref: InstanceRef, force: boolean): Promise<void> {
    const fencingToken = this.deps.fencingTokenOf(ref.group);
    if (fencingToken === null) return;
    const body = { group: ref.group, fencing_token: fencingToken, instance_id: ref.instanceId };
    const result = await this.send(ref.node, force ? { type: "force_stop_instance", body } : { type: "stop_instance", body });
    if (result.ok) return;
    if (result.error_code === "UNKNOWN_INSTANCE") {
      // Nothing runs there (never started, or already gone): the stop is complete.
      this.deps.toInstance(ref.instanceId, { type: "EXITED", exitCode: 0 });
      return;
    }
    this.deps.logger.warn(`${force ? "Force-stop" : "Stop"} of ${ref.instanceId} on ${ref.node} failed: ${result.error_code} ${result.message}`);
  }

  /** An instance the daemon runs but nobody should: kill it (only when this controller owns its group). */
  async forceStopStray(nodeId: string, instanceId: string, group: string): Promise<void> {
    const fencingToken = this.deps.fencingTokenOf(group);
    if (fencingToken === null) return;
    this.deps.logger.warn(`Node ${nodeId} runs ${instanceId} of ${group}, which is not a live instance: force-stopping it`);
    await this.send(nodeId, { type: "force_stop_instance", body: { group, fencing_token: fencingToken, instance_id: instanceId } });
  }

  /**
   * A node (re)connected: instances waiting for it in SCHEDULED are sent now instead of at their
   * next dispatch attempt (a daemon restart should not cost a dispatch timeout).
   */
  redispatchScheduled(nodeId: string): void {
    for (const instance of this.deps.live.onNode(nodeId)) {
      if (this.deps.supervised.stateOf(instance.id) === "SCHEDULED")
        this.deps.track(this.dispatch({ instanceId: instance.id, group: instance.group, node: nodeId }));
    }
  }

  /** One command; a thrown failure (not connected, forwarding failed) comes back as a refused result. */
  async send(nodeId: string, command: InstanceCommand): Promise<CommandResult> {
    // Tests freeze a controller here, its fencing token already in the command (test-freeze.ts).
    freezePoint(`daemon-command:${command.type}`);
    try {
      return await this.deps.daemons.sendCommand(nodeId, command);
    } catch (err) {
      const code = (err as { code?: string }).code ?? "COMMAND_FAILED";
      return { command_id: "", ok: false, error_code: code, message: (err as Error).message };
    }
  }
}

/** A command the daemon refused, as the operator sees it. */
export function refused(result: CommandResult): Error {
  return conflict(
    `The daemon refused the command: ${result.error_code}${result.message ? ` (${result.message})` : ""}`,
    result.error_code || "COMMAND_REFUSED",
  );
}

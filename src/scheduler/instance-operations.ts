/**
 * Operator and plugin actions on one instance: stop, force-stop, a console command, readiness and
 * the player count. An instance supervised here gets the action through its actor; one whose group
 * another controller schedules gets the command straight on its daemon, stamped with the holder's
 * fencing token (the holder's actor follows the daemon's report).
 *
 * A stop is acknowledged only once it cannot be lost: here, the owner writes `stopRequested` on the
 * record before its actor hears of it (an owner that takes over completes it); elsewhere, the daemon
 * has accepted the stop (it completes it without any controller, and remembers how it ended).
 */
import type { GroupEvent } from "../../actors/group/transitions.js";
import type { InstanceEvent } from "../../actors/instance/transitions.js";
import type { GroupService } from "../domain/groups/group-service.js";
import type { InstanceFields, InstanceService, StopRequest } from "../domain/instances/instance-service.js";
import { FINISHED_STATES } from "../domain/instances/instance-schemas.js";
import type { Logger } from "../logs/types.js";
import { ApiError, conflict, notFound } from "../shared/errors.js";
import type { CommandResult, InstanceCommand } from "../wire/daemon-proto.js";
import { refused } from "./command-dispatch.js";
import { READY_CHAIN } from "./daemon-report-router.js";
import type { LiveInstances } from "./live-instances.js";
import { ScopeLostError, type ScopeOwnership } from "./scopes.js";
import type { SupervisedInstances } from "./supervised-instances.js";

export interface InstanceOperationsDeps {
  instances: Pick<InstanceService, "getDoc">;
  groups: Pick<GroupService, "getDoc" | "setStoppedByOperator">;
  scopes: Pick<ScopeOwnership, "scopeOf" | "holderFencingToken">;
  live: LiveInstances;
  supervised: SupervisedInstances;
  logger: Logger;
  fencingTokenOf(group: string): number | null;
  /** One daemon command; failures come back as refused results. */
  send(nodeId: string, command: InstanceCommand): Promise<CommandResult>;
  /** The player count on the record, in order with the instance's state writes; fenced by the scope when `fenced`. */
  savePlayerCount(instanceId: string, playerCount: number, fenced: boolean): Promise<void>;
  /**
   * Whether this controller writes the instance's record: its owner (a controller that is still
   * starting owns nothing), or any controller that runs no scheduler at all, unfenced. Elsewhere
   * the owner follows the registry (player-count-sync.ts).
   */
  writesRecordOf(instanceId: string): boolean;
  /** A count was written to the record (the group's aggregates changed). */
  playerCountWritten(instanceId: string, group: string): void;
  /** The owner's durable stop intent on the record (fenced; {@link ScopeLostError} when the scope moved); false when finished. */
  requestStop(instanceId: string, group: string, kind: StopRequest): Promise<boolean>;
  toInstance(instanceId: string, event: InstanceEvent): void;
  toGroup(group: string, event: GroupEvent): void;
}

/** Actions on single instances, wherever their group is scheduled. */
export class InstanceOperations {
  constructor(private readonly deps: InstanceOperationsDeps) {}

  /** Graceful stop (the platform's stop command, then SIGTERM, then SIGKILL), or a kill at once. */
  async stopInstance(id: string, force: boolean): Promise<void> {
    const doc = await this.requireLive(id);
    // A graceful stop of a STATIC instance keeps its slot stopped until the group is started
    // again; it is noted on the group record before the stop goes out, so whichever controller
    // schedules the group reads it before the instance is STOPPED. A force-stop is respawned.
    const holdsSlot = !force && (await this.deps.groups.getDoc(doc.group))?.static === true;
    if (holdsSlot) await this.deps.groups.setStoppedByOperator(doc.group, id, true);
    const kind = force ? "FORCE_STOP" : "STOP";
    if (this.deps.supervised.has(id)) {
      let recorded: boolean | null = null;
      try {
        recorded = await this.deps.requestStop(id, doc.group, kind);
      } catch (err) {
        // The scope moved meanwhile: the stop goes to the daemon under the new holder's token.
        if (!(err instanceof ScopeLostError)) throw err;
      }
      if (recorded === true) {
        this.deps.toInstance(id, { type: kind });
        return;
      }
      if (recorded === false) {
        if (holdsSlot) await this.deps.groups.setStoppedByOperator(doc.group, id, false);
        throw conflict(`Instance ${id} finished meanwhile`, "INVALID_STATE");
      }
    }
    const body = { group: doc.group, fencing_token: await this.actingFencingToken(doc.group), instance_id: id };
    const result = await this.deps.send(doc.node, force ? { type: "force_stop_instance", body } : { type: "stop_instance", body });
    if (result.ok) return;
    if (holdsSlot) await this.deps.groups.setStoppedByOperator(doc.group, id, false);
    throw refused(result);
  }

  /** Writes one line to the instance's standard input. */
  async sendCommand(id: string, line: string): Promise<void> {
    const doc = await this.requireLive(id);
    const result = await this.deps.send(doc.node, {
      type: "stdin_instance",
      body: { group: doc.group, fencing_token: await this.actingFencingToken(doc.group), instance_id: id, line },
    });
    if (!result.ok) throw refused(result);
  }

  /** The in-server plugin reported ready: RUNNING, and the daemon is told (plugin readiness). */
  async markReady(id: string): Promise<void> {
    const doc = await this.requireLive(id);
    // A ready server runs: catch the actor up if reports of the earlier states are late.
    for (const event of READY_CHAIN) this.deps.toInstance(id, event);
    // The daemon then reports RUNNING, which reaches the group's scheduler wherever it runs.
    const result = await this.deps.send(doc.node, {
      type: "mark_instance_ready",
      body: { group: doc.group, fencing_token: await this.actingFencingToken(doc.group), instance_id: id },
    });
    if (result.ok || result.error_code === "INVALID_STATE") return;
    this.deps.logger.warn(`Node ${doc.node} refused the readiness of ${id}: ${result.error_code}`);
    // Answered 503, so the plugin reports it again (its client retries a 503): a lease that moved
    // while the call was on its way (STALE_EPOCH) or a daemon between controllers must not leave a
    // ready server STARTING until its start timeout.
    throw new ApiError(503, "READY_NOT_DELIVERED", `Node ${doc.node} did not take the readiness of ${id} (${result.error_code}); report it again`);
  }

  /** The player count of an instance changed (plugin player routes). */
  async playerCountChanged(id: string, playerCount: number): Promise<void> {
    const live = this.deps.live.get(id);
    if (!this.deps.writesRecordOf(id)) {
      if (live) this.deps.live.setPlayerCount(id, playerCount);
      return;
    }
    // The view changes once the record did: a failed write leaves them apart, and the owner's next pass writes again.
    try {
      await this.deps.savePlayerCount(id, playerCount, this.deps.supervised.has(id));
    } catch (err) {
      // The scope moved while the count was being written: the new owner writes it from the registry.
      if (err instanceof ScopeLostError) return;
      throw err;
    }
    if (live) this.deps.live.setPlayerCount(id, playerCount);
    const group = live?.group ?? (await this.deps.instances.getDoc(id))?.group;
    if (group !== undefined) this.deps.playerCountWritten(id, group);
    if (playerCount === 0 && this.deps.supervised.stateOf(id) === "DRAINING") this.deps.toInstance(id, { type: "EMPTY" });
    if (live) this.deps.toGroup(live.group, { type: "CHANGED" });
  }

  /** This controller's fencing token for the group, or the holder's when another controller schedules it. */
  private async actingFencingToken(group: string): Promise<number> {
    return this.deps.fencingTokenOf(group) ?? (await this.deps.scopes.holderFencingToken(this.deps.scopes.scopeOf(group))) ?? 0;
  }

  private async requireLive(id: string): Promise<InstanceFields> {
    const doc = await this.deps.instances.getDoc(id);
    if (!doc) throw notFound(`Instance not found: ${id}`);
    if (FINISHED_STATES.has(doc.state)) throw conflict(`Instance ${id} is ${doc.state}`, "INVALID_STATE");
    return doc;
  }
}

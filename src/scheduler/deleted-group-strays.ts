/**
 * What a deleted group leaves behind is stopped, so no orphan survives it:
 *
 * - **a process no live record accounts for** (its record ended while it ran, e.g. replaced after
 *   its node was lost, then the node came back): the owner of its group force-stops it with the
 *   group's fencing token; a group that no longer exists has no owner, so whoever sees the process
 *   force-stops it with a token the daemons accept for the group (no controller acts on it any more);
 * - **live records of a group that no longer exists** (its owner died while stopping them): the
 *   group's scope is tracked again, so that one controller takes it, adopts the instances and stops
 *   them (scope-lifecycle.ts); the sweep lets it go once the records are finished.
 */
import type { GroupService } from "../domain/groups/group-service.js";
import type { Logger } from "../logs/types.js";
import type { Clock } from "../shared/clock.js";
import type { CommandResult, InstanceCommand } from "../wire/daemon-proto.js";
import type { FinishedSweeper } from "./finished-sweeper.js";

export interface DeletedGroupStraysDeps {
  groups: Pick<GroupService, "getDoc">;
  sweeper: Pick<FinishedSweeper, "groupDeleted" | "tracksDeleted">;
  clock: Clock;
  logger: Logger;
  /** A group is checked for existence at most once per this interval (the reconcile interval). */
  checkIntervalMs: number;
  isOwned(group: string): boolean;
  /** The owner's fenced force-stop of a stray (command-dispatch.ts). */
  forceStopOwned(nodeId: string, instanceId: string, group: string): Promise<void>;
  /** A token the daemons accept for a group nobody schedules; absent: strays of deleted groups are left alone. */
  strayFencingToken?(group: string): Promise<number>;
  send(nodeId: string, command: InstanceCommand): Promise<CommandResult>;
  /** Tracks the group's scope again (ownership acquires it). */
  trackGroup(group: string): void;
  track(work: Promise<unknown>): void;
}

/** Stops what deleted groups left running (see the module comment). */
export class DeletedGroupStrays {
  /** When each group with live records followed elsewhere was last checked for existence. */
  private readonly checkedAtMs = new Map<string, number>();
  private stopped = false;

  constructor(private readonly deps: DeletedGroupStraysDeps) {}

  stop(): void {
    this.stopped = true;
  }

  /** A node runs `instanceId` of `group` and no live record accounts for it. */
  async stopStray(nodeId: string, instanceId: string, group: string): Promise<void> {
    const { deps } = this;
    if (deps.isOwned(group) || !deps.strayFencingToken) return deps.forceStopOwned(nodeId, instanceId, group);
    if (await deps.groups.getDoc(group)) return;
    const fencingToken = await deps.strayFencingToken(group);
    deps.logger.warn(`Node ${nodeId} runs ${instanceId} of ${group}, a group that no longer exists: force-stopping it`);
    const result = await deps.send(nodeId, { type: "force_stop_instance", body: { group, fencing_token: fencingToken, instance_id: instanceId } });
    if (!result.ok && result.error_code !== "UNKNOWN_INSTANCE")
      deps.logger.warn(`Force-stop of ${instanceId} on ${nodeId} failed: ${result.error_code} ${result.message}`);
  }

  /** A node runs an instance of `group` whose live record another controller follows, or nobody when the group is gone. */
  liveElsewhere(group: string): void {
    const nowMs = this.deps.clock.nowMs();
    const checkedMs = this.checkedAtMs.get(group);
    if (this.deps.sweeper.tracksDeleted(group) || (checkedMs !== undefined && nowMs - checkedMs < this.deps.checkIntervalMs)) return;
    // Bounded by the groups seen within one interval.
    for (const [name, atMs] of this.checkedAtMs) if (nowMs - atMs >= this.deps.checkIntervalMs) this.checkedAtMs.delete(name);
    this.checkedAtMs.set(group, nowMs);
    this.deps.track(
      this.deps.groups.getDoc(group).then((doc) => {
        if (doc || this.stopped) return;
        this.deps.logger.warn(`Group ${group} no longer exists but has live instances: taking its scope to stop them`);
        this.deps.sweeper.groupDeleted(group);
        this.deps.trackGroup(group);
      }),
    );
  }
}

/**
 * Periodic housekeeping of the scheduler: deletes STOPPED and CRASHED instance records once they
 * have been listed for the retention (a STATIC group's slot records stay: they say which node holds
 * each slot's directory), keeps every stored group tracked for ownership (an event missed from a
 * peer must not leave a group without an owner), and untracks a deleted group once its instance
 * records in the store are all finished (whichever controller stopped them), so the lease of its
 * scope is released; until then some controller holds it and stops what is left. A delete is fenced
 * like a write: the scope's check after the read, then a delete only at the revision read (a record
 * written since, by anyone, stays).
 */
import type { GroupService } from "../domain/groups/group-service.js";
import type { InstanceService } from "../domain/instances/instance-service.js";
import { FINISHED_STATES } from "../domain/instances/instance-schemas.js";
import type { Clock, Timer } from "../shared/clock.js";
import { RevisionConflictError } from "../store/ports.js";
import type { LiveInstances } from "./live-instances.js";
import { ScopeLostError, type ScopeOwnership } from "./scopes.js";
import { slotNumber } from "./static-slots.js";

/** Bounds of the sweep interval: at least a second apart, at most a minute. */
export const sweepIntervalMinMs = 1_000;
export const sweepIntervalMaxMs = 60_000;

export interface FinishedSweeperDeps {
  groups: Pick<GroupService, "listDocs">;
  instances: Pick<InstanceService, "findRevisioned" | "findDocs" | "removeIf">;
  scopes: Pick<ScopeOwnership, "track" | "untrack">;
  live: LiveInstances;
  clock: Clock;
  /** How long finished records stay listed. */
  finishedRetentionMs: number;
  /** The evaluation interval; the sweep runs as often, within the bounds above. */
  evaluationIntervalMs: number;
  isOwned(group: string): boolean;
  /** Fencing check of the group's scope; throws ScopeLostError when it moved. */
  ensureCurrent(group: string): Promise<void>;
  track(work: Promise<unknown>): void;
}

/** Sweeps finished instance records and keeps group tracking in step with the store. */
export class FinishedSweeper {
  /** Deleted groups whose scopes stay tracked until their instances finished. */
  private readonly deletedGroups = new Set<string>();
  private timer: Timer | null = null;

  constructor(private readonly deps: FinishedSweeperDeps) {}

  start(): void {
    if (this.timer) return;
    const intervalMs = Math.max(sweepIntervalMinMs, Math.min(this.deps.evaluationIntervalMs, sweepIntervalMaxMs));
    this.timer = this.deps.clock.setInterval(() => this.deps.track(this.sweep()), intervalMs, { unref: true });
  }

  stop(): void {
    this.timer?.cancel();
    this.timer = null;
  }

  /** A group was deleted (or found gone with live instances): its scope stays tracked until its instances finished. */
  groupDeleted(name: string): void {
    this.deletedGroups.add(name);
  }

  /** Whether a deleted group's scope is still tracked here. */
  tracksDeleted(name: string): boolean {
    return this.deletedGroups.has(name);
  }

  /** One pass. */
  async sweep(): Promise<void> {
    await this.syncTrackedGroups();
    const cutoffMs = this.deps.clock.nowMs() - this.deps.finishedRetentionMs;
    const groups = new Map((await this.deps.groups.listDocs()).map((g) => [g.name, g]));
    for (const state of ["STOPPED", "CRASHED"] as const) {
      for (const { doc, rev } of await this.deps.instances.findRevisioned({ state })) {
        const group = groups.get(doc.group);
        if (group?.static && slotNumber(group.name, doc.id) !== null) continue;
        // Another controller sweeps the groups it schedules; a deleted group's records are anyone's.
        if (!this.deps.isOwned(doc.group) && group) continue;
        const endedMs = doc.stoppedAt ? Date.parse(doc.stoppedAt) : 0;
        if (endedMs > cutoffMs) continue;
        try {
          if (group) await this.deps.ensureCurrent(doc.group);
          await this.deps.instances.removeIf(doc.id, rev);
        } catch (err) {
          // The scope moved (its new owner sweeps), or the record was written since it was judged finished.
          if (err instanceof ScopeLostError || err instanceof RevisionConflictError) continue;
          throw err;
        }
        this.deps.live.remove(doc.id);
      }
    }
  }

  private async syncTrackedGroups(): Promise<void> {
    const names = new Set((await this.deps.groups.listDocs()).map((g) => g.name));
    for (const name of names) this.deps.scopes.track(name);
    for (const name of [...this.deletedGroups]) {
      if (names.has(name)) {
        this.deletedGroups.delete(name);
        continue;
      }
      if ((await this.deps.instances.findDocs({ group: name })).every((doc) => FINISHED_STATES.has(doc.state))) {
        this.deps.scopes.untrack(name);
        this.deletedGroups.delete(name);
      }
    }
  }
}

/**
 * STATIC groups are slots: a group of minInstances N has the instances `<group>-1` … `<group>-N`,
 * and each keeps its working directory (`static/<group>/<id>` on its node) from one run to the
 * next. Pure: the group's instance records and the ids an operator stopped in, the slots to
 * (re)start and the node each must go back to out. The rules are in docs/decisions/scheduler.md
 * ("STATIC slots"):
 *
 * - a slot is free when its id has no record, or its record is STOPPED or CRASHED and no operator
 *   stopped it; an instance still DRAINING or STOPPING keeps its slot until it has finished, so
 *   its id is never given to a second process and nothing starts under a new id meanwhile;
 * - free slots start lowest first, and only slots 1 … N (a higher one waits until minInstances
 *   grows again);
 * - a slot whose record names a node goes back to that node (its home), which holds the directory:
 *   it never moves to another node while that node is known.
 */
import type { InstanceState } from "../domain/instances/instance-schemas.js";
import { FINISHED_STATES } from "../domain/instances/instance-schemas.js";

/** What slot planning needs of an instance record of the group (finished ones included). */
export interface SlotRecord {
  id: string;
  state: InstanceState;
  node: string;
}

/** One slot to start: its id and the node holding its directory (null: never ran, place anywhere). */
export interface SlotStart {
  id: string;
  home: string | null;
}

/** The id of slot `n` of `group`. */
export function slotId(group: string, n: number): string {
  return `${group}-${n}`;
}

/** The slot number of `id` in `group` (`<group>-<n>`, n ≥ 1 without leading zeros), or null. */
export function slotNumber(group: string, id: string): number | null {
  if (!id.startsWith(`${group}-`)) return null;
  const rest = id.slice(group.length + 1);
  return /^[1-9][0-9]{0,8}$/.test(rest) ? Number(rest) : null;
}

/**
 * The free slots of a STATIC group among 1 … `slots`, lowest first, at most `count`: the ids to
 * start now, each with the node its last record names.
 */
export function freeSlots(group: string, slots: number, records: readonly SlotRecord[], stoppedByOperator: ReadonlySet<string>, count: number): SlotStart[] {
  const byId = new Map(records.map((r) => [r.id, r]));
  const free: SlotStart[] = [];
  for (let n = 1; n <= slots && free.length < count; n++) {
    const id = slotId(group, n);
    if (stoppedByOperator.has(id)) continue;
    const record = byId.get(id);
    if (record && !FINISHED_STATES.has(record.state)) continue;
    free.push({ id, home: record ? record.node : null });
  }
  return free;
}

/**
 * Test harness for table-derived machines: finds an event path from the initial state to any state
 * of a transition table, and runs an actor under xstate's SimulatedClock with every effect recorded.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { createActor, SimulatedClock, type AnyStateMachine } from "xstate";
import { isDelayEvent, tableToMarkdown, type TransitionRow } from "../../actors/shared/transition-table.js";

/** Shortest list of plain, unguarded events leading from `initial` to `target` (BFS over the table). */
export function pathTo<S extends string>(table: readonly TransitionRow<S>[], initial: S, target: S): string[] {
  const previous = new Map<S, { from: S; event: string } | null>([[initial, null]]);
  const queue: S[] = [initial];
  while (queue.length > 0) {
    const state = queue.shift() as S;
    if (state === target) break;
    for (const row of table) {
      if (row.from !== state || row.guard !== undefined || isDelayEvent(row.event) || row.event === "always") continue;
      if (previous.has(row.to)) continue;
      previous.set(row.to, { from: state, event: row.event });
      queue.push(row.to);
    }
  }
  if (!previous.has(target)) throw new Error(`no event path to ${target}`);
  const events: string[] = [];
  for (let step = previous.get(target); step; step = previous.get(step.from)) events.unshift(step.event);
  return events;
}

/** An actor with recorded effects and a simulated clock. */
export function startRecorded(machine: AnyStateMachine, effects: readonly string[], input: unknown) {
  const clock = new SimulatedClock();
  const calls: string[] = [];
  const actions = Object.fromEntries(effects.map((name) => [name, () => void calls.push(name)]));
  const actor = createActor(machine.provide({ actions }), { clock, input });
  actor.start();
  return {
    clock,
    calls,
    actor,
    state: () => actor.getSnapshot().value as string,
    /** Effects recorded since the last call. */
    take: () => calls.splice(0, calls.length),
  };
}

/** The Markdown table between `<!-- table:name -->` and `<!-- /table:name -->` of a docs file. */
export function documentedTable(docsPath: string, name: string): string {
  const text = readFileSync(join(import.meta.dirname, "..", "..", docsPath), "utf8");
  const start = text.indexOf(`<!-- table:${name} -->`);
  const end = text.indexOf(`<!-- /table:${name} -->`);
  if (start < 0 || end < 0) throw new Error(`${docsPath}: table markers for ${name} missing`);
  return text.slice(text.indexOf("\n", start) + 1, end).trim();
}

/** The table as rendered into the docs. */
export function renderedTable<S extends string>(table: readonly TransitionRow<S>[]): string {
  return tableToMarkdown(table);
}

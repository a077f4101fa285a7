/**
 * Transition tables as data. Each machine in actors/ writes its edges as rows (from, event, to,
 * effects) and derives its xstate `states` config from them with {@link statesFromTable}, so the
 * table the docs and the tests read is the machine that runs.
 *
 * Event spellings: a plain event type (`"READY"`), `"after:<delayName>"` for a named delay (the
 * machine's `delays` map says how long; a `SimulatedClock` drives it in tests), or `"always"` for an
 * eventless edge taken as soon as its guard holds.
 */

/** One edge of a machine. Rows with the same `from` and `event` are tried in table order. */
export interface TransitionRow<S extends string = string> {
  from: S;
  event: string;
  to: S;
  /** Named actions with side effects, provided from src/ (the daemon command, a crash record). */
  effects: readonly string[];
  /** Named context updates (pure `assign`s) run before the effects. */
  updates?: readonly string[];
  /** Named guard; a row without one is the fallback of its (from, event). */
  guard?: string;
  /**
   * For a self-edge: exit and re-enter the state, restarting its timers. A self-edge without it
   * only runs its actions and keeps the running timers.
   */
  reenter?: boolean;
}

/** The prefix of delayed-event spellings. */
export const AFTER_PREFIX = "after:";

/** Whether `event` is a named delay rather than an event type. */
export function isDelayEvent(event: string): boolean {
  return event.startsWith(AFTER_PREFIX);
}

/** The delay name of an `after:<name>` spelling. */
export function delayName(event: string): string {
  return event.slice(AFTER_PREFIX.length);
}

/**
 * Checks a table: every state named is known, every (from, event) has its guarded rows before one
 * optional fallback, and no final state has outgoing edges. Throws on the first problem: a broken
 * table is a bug in the definition, found when the module loads.
 */
export function checkTable<S extends string>(table: readonly TransitionRow<S>[], states: readonly S[], finalStates: readonly S[]): void {
  const known = new Set<string>(states);
  const fallbackSeen = new Set<string>();
  const guardsSeen = new Set<string>();
  for (const row of table) {
    const where = `${row.from} --${row.event}--> ${row.to}`;
    if (!known.has(row.from) || !known.has(row.to)) throw new Error(`transition table: unknown state in ${where}`);
    if ((finalStates as readonly string[]).includes(row.from)) throw new Error(`transition table: edge out of final state: ${where}`);
    const key = `${row.from}\u0000${row.event}`;
    if (fallbackSeen.has(key)) throw new Error(`transition table: row after the fallback of ${row.from}/${row.event}: ${where}`);
    if (row.guard === undefined) fallbackSeen.add(key);
    else {
      const guardKey = `${key}\u0000${row.guard}`;
      if (guardsSeen.has(guardKey)) throw new Error(`transition table: duplicate guard ${row.guard}: ${where}`);
      guardsSeen.add(guardKey);
    }
    if (row.reenter && row.from !== row.to) throw new Error(`transition table: reenter on a non-self edge: ${where}`);
  }
}

interface TransitionConfig {
  target?: string;
  guard?: string;
  actions: string[];
  reenter?: boolean;
}

/** Per-state additions the table does not carry: `type: "final"`, `invoke`, `entry`, tags. */
export type StateExtras<S extends string> = Partial<Record<S, Record<string, unknown>>>;

/**
 * Derives the xstate `states` config of a flat machine from `table`. The result is untyped on
 * purpose (the table is the typed source); machines pass it to `createMachine` as is.
 */
export function statesFromTable<S extends string>(table: readonly TransitionRow<S>[], states: readonly S[], extras: StateExtras<S> = {}): Record<S, any> {
  const out = {} as Record<S, any>;
  for (const state of states) {
    const on: Record<string, TransitionConfig[]> = {};
    const after: Record<string, TransitionConfig[]> = {};
    const always: TransitionConfig[] = [];
    for (const row of table) {
      if (row.from !== state) continue;
      const config: TransitionConfig = { actions: [...(row.updates ?? []), ...row.effects] };
      if (row.to !== row.from || row.reenter) config.target = row.to;
      if (row.reenter) config.reenter = true;
      if (row.guard !== undefined) config.guard = row.guard;
      if (row.event === "always") always.push(config);
      else if (isDelayEvent(row.event)) (after[delayName(row.event)] ??= []).push(config);
      else (on[row.event] ??= []).push(config);
    }
    const node: Record<string, unknown> = { ...extras[state] };
    if (Object.keys(on).length > 0) node.on = on;
    if (Object.keys(after).length > 0) node.after = after;
    if (always.length > 0) node.always = always;
    out[state] = node;
  }
  return out;
}

/** The event spellings (plain and delayed) leaving `state` in `table`. */
export function eventsFrom<S extends string>(table: readonly TransitionRow<S>[], state: S): Set<string> {
  return new Set(table.filter((r) => r.from === state).map((r) => r.event));
}

/** Renders `table` as a Markdown table (docs/decisions keep a copy; a test checks it is current). */
export function tableToMarkdown<S extends string>(table: readonly TransitionRow<S>[]): string {
  const lines = ["| from | event | guard | to | effects |", "|---|---|---|---|---|"];
  for (const row of table) {
    const effects = [...(row.updates ?? []), ...row.effects].join(", ") || "—";
    const to = row.from === row.to && !row.reenter ? `${row.to} (stays)` : row.from === row.to ? `${row.to} (re-entered)` : row.to;
    lines.push(`| ${row.from} | ${row.event} | ${row.guard ?? ""} | ${to} | ${effects} |`);
  }
  return lines.join("\n");
}

/**
 * A linearizability checker for a key-value register model (put, get, compare-and-set), in the
 * manner of Wing & Gong with Lowe's memoization (the algorithm Porcupine uses).
 *
 * The history is partitioned per key (linearizability is compositional, so every key can be checked
 * on its own). For one key the call and return events are sorted by time into a doubly linked list;
 * the search repeatedly tries to linearize a pending call whose effect the model accepts, "lifting"
 * it (and its return) out of the list, and backtracks when it meets a return event whose call has not
 * been linearized yet. A cache of (set of linearized operations, model state) pairs already explored
 * prunes the search.
 *
 * An operation whose outcome is unknown (timed out, connection lost) has `returnMs: null`: it is
 * treated as returning at +infinity with whatever output the model produces, so it may take effect at
 * any point after its call, or never (taking effect after everything else is indistinguishable from
 * never). A `get` with unknown outcome constrains nothing and is dropped.
 *
 * Events at equal times: a call sorts before a return, so operations that touch at one instant count
 * as concurrent. That can only hide a violation, never report a false one.
 *
 * The search is exponential in the worst case; it is bounded by `timeoutMs` of wall-clock time across
 * all keys (default {@link checkTimeoutDefaultMs}) and reports `{ ok: "unknown" }` when the bound is
 * reached before an answer.
 */

export type OperationKind = "put" | "get" | "cas";

export interface Operation {
  clientId: number;
  kind: OperationKind;
  key: string;
  /** put: the value written; cas: the new value. */
  value?: string;
  /** cas: the value the key must hold (null: absent) for the swap to happen. */
  expected?: string | null;
  callMs: number;
  /** null when the outcome is unknown (timed out): the operation may or may not have taken effect. */
  returnMs: number | null;
  /** get: the value read (string, or null when absent); cas: whether it swapped; put: ignored. */
  output?: unknown;
}

export type CheckResult = { ok: true } | { ok: false; key: string; explanation: string } | { ok: "unknown" };

export interface CheckOptions {
  /** Wall-clock bound on the whole search; past it the result is `{ ok: "unknown" }`. */
  timeoutMs?: number;
}

export const checkTimeoutDefaultMs = 10_000;

/** How many search steps run between two looks at the clock. */
const clockCheckIntervalSteps = 1024;
/** Bounds on the size of a failure explanation. */
const explanationPrefixOpsMax = 20;
const explanationCandidatesMax = 10;

type RegisterState = string | null;

/**
 * Checks a history of key-value operations for linearizability. Throws a TypeError on a malformed
 * operation (return before call, a completed get without a string/null output, a completed cas
 * without a boolean output).
 */
export function checkLinearizable(history: readonly Operation[], opts: CheckOptions = {}): CheckResult {
  const timeoutMs = opts.timeoutMs ?? checkTimeoutDefaultMs;
  const deadline = performance.now() + timeoutMs;
  const byKey = new Map<string, Operation[]>();
  for (const op of history) {
    validateOperation(op);
    if (op.kind === "get" && op.returnMs === null) continue;
    let ops = byKey.get(op.key);
    if (ops === undefined) {
      ops = [];
      byKey.set(op.key, ops);
    }
    ops.push(op);
  }
  for (const key of [...byKey.keys()].sort()) {
    const result = checkKey(key, byKey.get(key) ?? [], deadline);
    if (result.ok !== true) return result;
  }
  return { ok: true };
}

function validateOperation(op: Operation): void {
  if (op.returnMs !== null && op.returnMs < op.callMs) {
    throw new TypeError(`operation returns before its call: ${describeOperation(op)}`);
  }
  if (op.kind !== "get" && typeof op.value !== "string") {
    throw new TypeError(`${op.kind} needs a string value: ${describeOperation(op)}`);
  }
  if (op.kind === "cas" && op.expected === undefined) {
    throw new TypeError(`cas needs an expected value (string or null): ${describeOperation(op)}`);
  }
  if (op.returnMs === null) return;
  if (op.kind === "get" && op.output !== null && typeof op.output !== "string") {
    throw new TypeError(`a completed get needs a string or null output: ${describeOperation(op)}`);
  }
  if (op.kind === "cas" && typeof op.output !== "boolean") {
    throw new TypeError(`a completed cas needs a boolean output: ${describeOperation(op)}`);
  }
}

interface StepResult {
  legal: boolean;
  next: RegisterState;
}

/** The sequential specification of one register. */
function stepModel(state: RegisterState, op: Operation): StepResult {
  switch (op.kind) {
    case "put":
      return { legal: true, next: op.value ?? null };
    case "get":
      return { legal: op.returnMs === null || op.output === state, next: state };
    case "cas": {
      const swaps = state === op.expected;
      const next = swaps ? (op.value ?? null) : state;
      return { legal: op.returnMs === null || op.output === swaps, next };
    }
  }
}

interface EventNode {
  /** Index of the operation within the key's list. */
  readonly id: number;
  readonly isCall: boolean;
  readonly timeMs: number;
  /** For a call, its return event. */
  match: EventNode | null;
  prev: EventNode | null;
  next: EventNode | null;
}

function buildEventList(ops: readonly Operation[]): EventNode {
  const events: EventNode[] = [];
  ops.forEach((op, id) => {
    const call: EventNode = { id, isCall: true, timeMs: op.callMs, match: null, prev: null, next: null };
    const ret: EventNode = {
      id,
      isCall: false,
      timeMs: op.returnMs ?? Number.POSITIVE_INFINITY,
      match: null,
      prev: null,
      next: null,
    };
    call.match = ret;
    events.push(call, ret);
  });
  events.sort((a, b) => {
    if (a.timeMs !== b.timeMs) return a.timeMs < b.timeMs ? -1 : 1;
    if (a.isCall !== b.isCall) return a.isCall ? -1 : 1;
    return a.id - b.id;
  });
  const head: EventNode = { id: -1, isCall: false, timeMs: Number.NEGATIVE_INFINITY, match: null, prev: null, next: null };
  let last = head;
  for (const event of events) {
    last.next = event;
    event.prev = last;
    last = event;
  }
  return head;
}

function lift(call: EventNode): void {
  const ret = call.match as EventNode;
  (call.prev as EventNode).next = call.next;
  (call.next as EventNode).prev = call.prev;
  (ret.prev as EventNode).next = ret.next;
  if (ret.next !== null) ret.next.prev = ret.prev;
}

function unlift(call: EventNode): void {
  const ret = call.match as EventNode;
  (ret.prev as EventNode).next = ret;
  if (ret.next !== null) ret.next.prev = ret;
  (call.prev as EventNode).next = call;
  (call.next as EventNode).prev = call;
}

/**
 * The set of linearized operations, numbered in call order. Linearized operations are nearly always
 * "every id below `low`" plus a few ids above it (those inside the current concurrency window), so
 * the set is written as that pair: a key whose length follows the window, not the history.
 */
class LinearizedSet {
  private readonly members: Uint8Array;
  /** The lowest id not in the set. */
  private low = 0;
  /** Ids in the set above `low`, ascending. */
  private above: number[] = [];

  constructor(size: number) {
    this.members = new Uint8Array(size + 1);
  }

  add(id: number): void {
    this.members[id] = 1;
    if (id !== this.low) {
      let at = this.above.length;
      while (at > 0 && this.above[at - 1] > id) at--;
      this.above.splice(at, 0, id);
      return;
    }
    while (this.members[this.low] === 1) this.low++;
    let drop = 0;
    while (drop < this.above.length && this.above[drop] < this.low) drop++;
    if (drop > 0) this.above = this.above.slice(drop);
  }

  remove(id: number): void {
    this.members[id] = 0;
    if (id >= this.low) {
      this.above.splice(this.above.indexOf(id), 1);
      return;
    }
    const between: number[] = [];
    for (let i = id + 1; i < this.low; i++) between.push(i);
    this.above = between.concat(this.above);
    this.low = id;
  }

  /** A key for the pair (this set, `state`). */
  key(state: RegisterState): string {
    return `${this.low}:${this.above.join(",")}|${state === null ? "" : `=${state}`}`;
  }
}

/**
 * A write whose outcome is unknown and whose value nobody could have observed may be left out:
 * taking effect could only have made later reads and compare-and-sets harder to explain. "Nobody"
 * means no get returned the value, no compare-and-set expected it, and no compare-and-set that
 * failed (which needs the value to differ from what it expected) returned after the write's call.
 */
function dropUnobservableWrites(ops: readonly Operation[]): Operation[] {
  const observed = new Set<string>();
  let lastFailedCasReturnMs = Number.NEGATIVE_INFINITY;
  for (const op of ops) {
    if (op.kind === "get" && typeof op.output === "string") observed.add(op.output);
    if (op.kind === "cas" && typeof op.expected === "string") observed.add(op.expected);
    if (op.kind === "cas" && op.returnMs !== null && op.output === false) {
      lastFailedCasReturnMs = Math.max(lastFailedCasReturnMs, op.returnMs);
    }
  }
  return ops.filter((op) => op.returnMs !== null || op.kind === "get" || observed.has(op.value ?? "") || lastFailedCasReturnMs > op.callMs);
}

interface Frame {
  readonly call: EventNode;
  readonly stateBefore: RegisterState;
}

function checkKey(key: string, keyOps: readonly Operation[], deadline: number): CheckResult {
  const ops = dropUnobservableWrites(keyOps).sort((a, b) => a.callMs - b.callMs);
  const head = buildEventList(ops);
  const linearized = new LinearizedSet(ops.length);
  const explored = new Set<string>();
  const stack: Frame[] = [];
  let state: RegisterState = null;
  // The deepest linearization reached, for the explanation. `shared` is how much of the stack
  // still equals `best` since it was recorded, so a new record copies only what changed.
  const best: { ids: number[]; state: RegisterState } = { ids: [], state: null };
  let shared = 0;
  let steps = 0;
  let entry = head.next;
  while (entry !== null) {
    if (++steps % clockCheckIntervalSteps === 0 && performance.now() > deadline) return { ok: "unknown" };
    if (entry.isCall) {
      const result = stepModel(state, ops[entry.id]);
      if (result.legal) {
        linearized.add(entry.id);
        const exploredKey = linearized.key(result.next);
        if (!explored.has(exploredKey)) {
          explored.add(exploredKey);
          stack.push({ call: entry, stateBefore: state });
          state = result.next;
          lift(entry);
          if (stack.length > best.ids.length) {
            best.ids.length = shared;
            for (let i = shared; i < stack.length; i++) best.ids.push(stack[i].call.id);
            best.state = state;
            shared = stack.length;
          }
          entry = head.next;
          continue;
        }
        linearized.remove(entry.id);
      }
      entry = entry.next;
      continue;
    }
    // A return whose call is still in the list: the current prefix cannot be extended. Backtrack.
    const frame = stack.pop();
    if (frame === undefined) {
      return { ok: false, key, explanation: explainFailure(key, ops, best.ids, best.state) };
    }
    linearized.remove(frame.call.id);
    shared = Math.min(shared, stack.length);
    state = frame.stateBefore;
    unlift(frame.call);
    entry = frame.call.next;
  }
  return { ok: true };
}

/**
 * Describes the longest linearizable prefix the search found and why none of the operations that
 * could come next fits after it.
 */
function explainFailure(key: string, ops: readonly Operation[], prefixIds: number[], state: RegisterState): string {
  const done = new Set(prefixIds);
  const remaining = ops.map((op, id) => ({ op, id })).filter(({ id }) => !done.has(id));
  const firstReturnMs = Math.min(...remaining.map(({ op }) => op.returnMs ?? Number.POSITIVE_INFINITY));
  const candidates = remaining.filter(({ op }) => op.callMs <= firstReturnMs);
  const lines: string[] = [];
  lines.push(`key ${JSON.stringify(key)}: no linearization of ${ops.length} operations exists.`);
  lines.push(`Longest linearizable prefix (${prefixIds.length} operations), leaving the value ${formatValue(state)}:`);
  const shown = prefixIds.slice(-explanationPrefixOpsMax);
  if (shown.length < prefixIds.length) lines.push(`  … ${prefixIds.length - shown.length} earlier operations`);
  for (const id of shown) lines.push(`  ${describeOperation(ops[id])}`);
  lines.push("None of the operations that may come next fits:");
  for (const { op } of candidates.slice(0, explanationCandidatesMax)) {
    const { legal } = stepModel(state, op);
    const why = legal ? "fits here, but every continuation after it fails" : explainIllegalStep(state, op);
    lines.push(`  ${describeOperation(op)}: ${why}`);
  }
  if (candidates.length > explanationCandidatesMax) {
    lines.push(`  … ${candidates.length - explanationCandidatesMax} more`);
  }
  return lines.join("\n");
}

function explainIllegalStep(state: RegisterState, op: Operation): string {
  if (op.kind === "get") return `read ${formatValue(op.output as RegisterState)} but the value is ${formatValue(state)}`;
  const swaps = state === op.expected;
  return `returned ${String(op.output)} but the value is ${formatValue(state)}, so it would have ${swaps ? "swapped" : "failed"}`;
}

function formatValue(value: RegisterState): string {
  return value === null ? "absent" : JSON.stringify(value);
}

/** One-line description of an operation, used in failure explanations. */
export function describeOperation(op: Operation): string {
  const key = JSON.stringify(op.key);
  let call: string;
  switch (op.kind) {
    case "put":
      call = `put(${key}, ${JSON.stringify(op.value)})`;
      break;
    case "get":
      call = `get(${key})`;
      break;
    case "cas":
      call = `cas(${key}, ${op.expected === null ? "absent" : JSON.stringify(op.expected)} → ${JSON.stringify(op.value)})`;
      break;
  }
  const output =
    op.returnMs === null ? "outcome unknown" : op.kind === "put" ? "ok" : op.kind === "get" ? formatValue(op.output as RegisterState) : String(op.output);
  const returned = op.returnMs === null ? "never returned" : `returned at ${op.returnMs} ms`;
  return `client ${op.clientId} ${call} → ${output} [called at ${op.callMs} ms, ${returned}]`;
}

/** A handle to one recorded operation. */
export type OperationHandle = number;

/**
 * Records a history for {@link checkLinearizable}. Call {@link invoke} when a client sends a
 * request and then exactly one of {@link complete} (a response arrived), {@link timeout} (the
 * outcome is unknown) or {@link discard} (the operation certainly never took effect, e.g. the
 * server refused it before doing anything). Operations never completed count as timed out.
 */
export class HistoryRecorder {
  private readonly ops: Operation[] = [];
  private readonly settled: boolean[] = [];
  private readonly discarded = new Set<OperationHandle>();

  invoke(clientId: number, kind: OperationKind, key: string, args: { value?: string; expected?: string | null }, callMs: number): OperationHandle {
    const op: Operation = { clientId, kind, key, callMs, returnMs: null };
    if (args.value !== undefined) op.value = args.value;
    if (args.expected !== undefined) op.expected = args.expected;
    this.ops.push(op);
    this.settled.push(false);
    return this.ops.length - 1;
  }

  complete(handle: OperationHandle, output: unknown, returnMs: number): void {
    this.settle(handle);
    const op = this.ops[handle];
    op.returnMs = returnMs;
    op.output = output;
  }

  timeout(handle: OperationHandle): void {
    this.settle(handle);
  }

  discard(handle: OperationHandle): void {
    this.settle(handle);
    this.discarded.add(handle);
  }

  isSettled(handle: OperationHandle): boolean {
    return this.settled[handle] === true;
  }

  /** The recorded operations, discarded ones left out. */
  history(): Operation[] {
    return this.ops.filter((_, handle) => !this.discarded.has(handle)).map((op) => ({ ...op }));
  }

  private settle(handle: OperationHandle): void {
    if (handle < 0 || handle >= this.ops.length) throw new RangeError(`unknown operation handle ${handle}`);
    if (this.settled[handle]) throw new Error(`operation ${handle} settled twice`);
    this.settled[handle] = true;
  }
}

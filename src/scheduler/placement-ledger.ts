/**
 * The placement ledger of one machine: every live reservation (an instance's port and memory) of
 * the nodes on one host, whichever controller placed it. It is kept as one value in the shared
 * key-value store (`cloud:v1:placement:host:<host>`) and changed only by compare-and-set of the
 * whole value, so a claim is checked against exactly the reservations it replaces: a port is taken
 * by one instance, and a node's reserved memory never passes its budget (docs/decisions/scheduler.md,
 * "One placement view"). Pure: text in, entries and verdicts out.
 *
 * The value is one line per reservation, each a JSON array `[instanceId, node, port, memoryMb,
 * group, claimedAtMs]`; lines that do not read as one are dropped (and so freed) on the next full
 * write. Ports are per host (two daemons on one machine share its ports), memory per node. A claim
 * appends its lines and a release cuts its line out, so neither re-encodes the whole ledger.
 */
import { KV_KEY_PREFIX } from "../coordination/keys.js";

/** Prefix of the ledgers: `cloud:v1:placement:host:<host>`. */
export const PLACEMENT_LEDGER_PREFIX = `${KV_KEY_PREFIX}placement:host:`;
/** The ledger of one machine. */
export const placementLedgerKey = (host: string): string => `${PLACEMENT_LEDGER_PREFIX}${host}`;

/** One live reservation. */
export interface Reservation {
  instanceId: string;
  group: string;
  node: string;
  port: number;
  memoryMb: number;
  /** When it was claimed (epoch ms): a reservation whose record is missing is swept only after a grace. */
  claimedAtMs: number;
}

/** A reservation with the line it is stored as. */
export interface LedgerEntry {
  reservation: Reservation;
  line: string;
}

/** Why a claim was refused. */
export interface ClaimRefusal {
  code: "PORT_TAKEN" | "MEMORY_FULL";
  message: string;
}

/** The stored line of a reservation. */
export function encodeReservation(r: Reservation): string {
  return JSON.stringify([r.instanceId, r.node, r.port, r.memoryMb, r.group, r.claimedAtMs]);
}

function decodeLine(line: string): Reservation | null {
  if (line === "") return null;
  try {
    const value: unknown = JSON.parse(line);
    if (!Array.isArray(value) || value.length !== 6) return null;
    const [instanceId, node, port, memoryMb, group, claimedAtMs] = value as unknown[];
    if (typeof instanceId !== "string" || typeof node !== "string" || typeof group !== "string") return null;
    if (!Number.isInteger(port) || !Number.isInteger(memoryMb) || typeof claimedAtMs !== "number") return null;
    return { instanceId, group, node, port: port as number, memoryMb: memoryMb as number, claimedAtMs };
  } catch {
    // A line of another format reserves nothing.
    return null;
  }
}

/** A ledger's entries by instance id (null or empty text: none). */
export function decodeLedger(text: string | null): Map<string, LedgerEntry> {
  return HostLedger.decode(text).entries;
}

/** The outcome of {@link HostLedger.planClaims}: the text to write, and the refusals. */
export interface ClaimPlan {
  /** The ledger's next text; null when no claim fits (nothing to write). */
  text: string | null;
  accepted: Reservation[];
  refusals: Map<string, ClaimRefusal>;
}

/**
 * One machine's ledger in memory, with the figures a claim is checked against (who holds each port,
 * the memory reserved per node). Plans never change it: {@link apply} and {@link drop} do, once the
 * planned text was written.
 */
export class HostLedger {
  readonly entries = new Map<string, LedgerEntry>();
  private readonly portHolder = new Map<number, string>();
  private readonly reservedByNode = new Map<string, number>();
  /** True when the stored text holds lines that are not entries: the next write re-encodes it. */
  private dirty = false;

  private constructor(
    /** The stored text this ledger was read from or written as (null: no ledger). */
    public text: string | null,
  ) {}

  static decode(text: string | null): HostLedger {
    const ledger = new HostLedger(text);
    if (text) {
      let clean = true;
      for (const line of text.split("\n")) {
        const reservation = decodeLine(line);
        if (reservation === null || ledger.entries.has(reservation.instanceId)) clean = false;
        else ledger.index({ reservation, line });
      }
      // A ledger with a line of another format is written whole next time (the line is dropped).
      if (!clean) ledger.dirty = true;
    }
    return ledger;
  }

  /** Memory reserved on a node. */
  reservedMb(node: string): number {
    return this.reservedByNode.get(node) ?? 0;
  }

  /**
   * Checks `claims` in order against the ledger (and the claims accepted before them): each fits
   * when no other instance of the host holds its port and its node's reserved memory stays within
   * `capacityMb(node)`. A claim for an instance already entered replaces that entry (a STATIC slot
   * started again under its id).
   */
  planClaims(claims: readonly Reservation[], capacityMb: (nodeId: string) => number): ClaimPlan {
    const refusals = new Map<string, ClaimRefusal>();
    const accepted: Reservation[] = [];
    const ports = new Map<number, string>();
    const extraMb = new Map<string, number>();
    let replaces = false;
    for (const claim of claims) {
      const previous = this.entries.get(claim.instanceId)?.reservation;
      const holder = ports.get(claim.port) ?? this.portHolder.get(claim.port);
      if (holder !== undefined && holder !== claim.instanceId) {
        refusals.set(claim.instanceId, { code: "PORT_TAKEN", message: `port ${claim.port} is reserved by ${holder}` });
        continue;
      }
      const reserved = this.reservedMb(claim.node) + (extraMb.get(claim.node) ?? 0) - (previous?.node === claim.node ? previous.memoryMb : 0);
      const capacity = capacityMb(claim.node);
      if (reserved + claim.memoryMb > capacity) {
        refusals.set(claim.instanceId, { code: "MEMORY_FULL", message: `needs ${claim.memoryMb} MB, ${reserved} of ${capacity} MB reserved on ${claim.node}` });
        continue;
      }
      if (previous) replaces = true;
      accepted.push(claim);
      ports.set(claim.port, claim.instanceId);
      extraMb.set(claim.node, (extraMb.get(claim.node) ?? 0) + claim.memoryMb - (previous?.node === claim.node ? previous.memoryMb : 0));
    }
    if (accepted.length === 0) return { text: null, accepted, refusals };
    const lines = accepted.map(encodeReservation);
    if (replaces || this.dirty) {
      const kept = [...this.entries.values()].filter((e) => !accepted.some((a) => a.instanceId === e.reservation.instanceId)).map((e) => e.line);
      return { text: [...kept, ...lines].join("\n"), accepted, refusals };
    }
    return { text: this.text ? `${this.text}\n${lines.join("\n")}` : lines.join("\n"), accepted, refusals };
  }

  /** The text without the entries of `ids` ("" when nothing is left); null when none of them is entered. */
  planRemoval(ids: Iterable<string>): string | null {
    const gone = [...ids].filter((id) => this.entries.has(id));
    if (gone.length === 0) return null;
    const line = this.entries.get(gone[0])!.line;
    const at = this.text?.indexOf(line) ?? -1;
    if (this.dirty || gone.length > 1 || this.text === null || at < 0) {
      const drop = new Set(gone);
      return [...this.entries.values()]
        .filter((e) => !drop.has(e.reservation.instanceId))
        .map((e) => e.line)
        .join("\n");
    }
    const before = this.text.slice(0, at);
    const after = this.text.slice(at + line.length);
    // Cut the line with one of its separators.
    return before.endsWith("\n") ? before.slice(0, -1) + after : after.startsWith("\n") ? before + after.slice(1) : before + after;
  }

  /** The planned claims were written as `text`. */
  apply(accepted: readonly Reservation[], text: string): void {
    for (const r of accepted) this.unindex(r.instanceId);
    for (const r of accepted) this.index({ reservation: r, line: encodeReservation(r) });
    this.text = text;
    this.dirty = false;
  }

  /** The planned removal was written as `text` ("" when the ledger was deleted). */
  drop(ids: Iterable<string>, text: string): void {
    for (const id of ids) this.unindex(id);
    this.text = text === "" ? null : text;
    this.dirty = false;
  }

  private index(entry: LedgerEntry): void {
    const r = entry.reservation;
    this.entries.set(r.instanceId, entry);
    this.portHolder.set(r.port, r.instanceId);
    this.reservedByNode.set(r.node, this.reservedMb(r.node) + r.memoryMb);
  }

  private unindex(id: string): void {
    const r = this.entries.get(id)?.reservation;
    if (!r) return;
    this.entries.delete(id);
    if (this.portHolder.get(r.port) === id) this.portHolder.delete(r.port);
    this.reservedByNode.set(r.node, this.reservedMb(r.node) - r.memoryMb);
  }
}

/**
 * The placement ledger of one machine: every live reservation (an instance's port and memory) of
 * the nodes on one host, whichever controller placed it. It is kept as one value in the shared
 * key-value store (`cloud:v1:placement:host:<host>`) and changed only by compare-and-set of the
 * whole value, so a claim is checked against exactly the reservations it replaces: a port is taken
 * by one instance, and a node's reserved memory never passes its budget (docs/decisions/scheduler.md,
 * "One placement view"). Pure: text in, entries and verdicts out.
 *
 * The value is one line per reservation, each a JSON array `[instanceId, node, port, memoryMb,
 * group, claimedAtMs]`; lines that do not read as one are dropped (and so freed) on the next write.
 * Ports are per host (two daemons on one machine share its ports), memory per node.
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

/** A ledger's entries by instance id (null or empty text: none). */
export function decodeLedger(text: string | null): Map<string, LedgerEntry> {
  const entries = new Map<string, LedgerEntry>();
  if (!text) return entries;
  for (const line of text.split("\n")) {
    const reservation = decodeLine(line);
    if (reservation) entries.set(reservation.instanceId, { reservation, line });
  }
  return entries;
}

/** The text of a ledger; "" when it holds nothing. */
export function encodeLedger(entries: Iterable<LedgerEntry>): string {
  const lines: string[] = [];
  for (const entry of entries) lines.push(entry.line);
  return lines.join("\n");
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

/**
 * Applies `claims` in order to a ledger's entries (changed in place): each one that fits is
 * entered; the others are returned with the reason. A claim fits when no other instance of the
 * host holds its port and its node's reserved memory stays within `capacityMb(node)`. A claim for
 * an instance already entered replaces that entry (a STATIC slot started again under its id).
 */
export function applyClaims(
  entries: Map<string, LedgerEntry>,
  claims: readonly Reservation[],
  capacityMb: (nodeId: string) => number,
): Map<string, ClaimRefusal> {
  const refusals = new Map<string, ClaimRefusal>();
  const portHolder = new Map<number, string>();
  const reservedMb = new Map<string, number>();
  for (const { reservation: r } of entries.values()) {
    portHolder.set(r.port, r.instanceId);
    reservedMb.set(r.node, (reservedMb.get(r.node) ?? 0) + r.memoryMb);
  }
  for (const claim of claims) {
    const previous = entries.get(claim.instanceId)?.reservation;
    const holder = portHolder.get(claim.port);
    if (holder !== undefined && holder !== claim.instanceId) {
      refusals.set(claim.instanceId, { code: "PORT_TAKEN", message: `port ${claim.port} is reserved by ${holder}` });
      continue;
    }
    const reserved = (reservedMb.get(claim.node) ?? 0) - (previous?.node === claim.node ? previous.memoryMb : 0);
    const capacity = capacityMb(claim.node);
    if (reserved + claim.memoryMb > capacity) {
      refusals.set(claim.instanceId, {
        code: "MEMORY_FULL",
        message: `needs ${claim.memoryMb} MB, ${reserved} of ${capacity} MB reserved on ${claim.node}`,
      });
      continue;
    }
    if (previous) {
      if (portHolder.get(previous.port) === previous.instanceId) portHolder.delete(previous.port);
      reservedMb.set(previous.node, (reservedMb.get(previous.node) ?? 0) - previous.memoryMb);
    }
    entries.set(claim.instanceId, { reservation: claim, line: encodeReservation(claim) });
    portHolder.set(claim.port, claim.instanceId);
    reservedMb.set(claim.node, reserved + claim.memoryMb);
  }
  return refusals;
}

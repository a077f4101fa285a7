/**
 * Small helpers over plain values: message construction, entry sizes and message classification.
 */
import type { ConfState, Entry, HardState, Message, NodeId, Ready } from "./types.js";
import { EntryType, MessageType } from "./types.js";

/** The shared empty payload. */
export const EMPTY_BYTES: Uint8Array = new Uint8Array(0);

/** Fixed allowance for an entry's header (term, index, type) when sizing messages and reads. */
export const ENTRY_HEADER_BYTES = 24;

/** The hard state of a node that never voted nor learned a term. */
export const EMPTY_HARD_STATE: HardState = { term: 0, vote: null, commit: 0 };

/** A configuration without members. */
export const EMPTY_CONF_STATE: ConfState = { voters: [], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false };

/** Size of an entry for `maxSizeBytes` limits: its payload plus a fixed header allowance. */
export function entrySizeBytes(entry: Entry): number {
  return entry.data.byteLength + ENTRY_HEADER_BYTES;
}

/** Payload bytes of entries, the measure of the uncommitted log limit (empty entries are free). */
export function payloadSizeBytes(entries: readonly Entry[]): number {
  let total = 0;
  for (const e of entries) total += e.data.byteLength;
  return total;
}

/** The longest prefix of `entries` within `maxSizeBytes`, but never fewer than one entry. */
export function limitSize<T extends Entry>(entries: T[], maxSizeBytes: number): T[] {
  if (entries.length === 0) return entries;
  let size = entrySizeBytes(entries[0]);
  let limit = 1;
  for (; limit < entries.length; limit++) {
    size += entrySizeBytes(entries[limit]);
    if (size > maxSizeBytes) break;
  }
  return limit === entries.length ? entries : entries.slice(0, limit);
}

/** A message with every field not given set to its zero value. */
export function makeMessage(fields: Partial<Message> & Pick<Message, "type">): Message {
  return {
    type: fields.type,
    from: fields.from ?? "",
    to: fields.to ?? "",
    term: fields.term ?? 0,
    logTerm: fields.logTerm ?? 0,
    index: fields.index ?? 0,
    entries: fields.entries ?? [],
    commit: fields.commit ?? 0,
    snapshot: fields.snapshot ?? null,
    reject: fields.reject ?? false,
    rejectHint: fields.rejectHint ?? 0,
    context: fields.context ?? EMPTY_BYTES,
  };
}

/** An entry of the normal type. */
export function makeEntry(term: number, index: number, data: Uint8Array = EMPTY_BYTES, type: EntryType = EntryType.Normal): Entry {
  return { term, index, type, data };
}

const localMessageTypes: ReadonlySet<MessageType> = new Set([
  MessageType.Hup,
  MessageType.Beat,
  MessageType.Unreachable,
  MessageType.SnapStatus,
  MessageType.CheckQuorum,
]);

/** Messages that a node generates for itself and that never travel the network. */
export function isLocalMessage(type: MessageType): boolean {
  return localMessageTypes.has(type);
}

const responseMessageTypes: ReadonlySet<MessageType> = new Set([
  MessageType.AppResp,
  MessageType.VoteResp,
  MessageType.PreVoteResp,
  MessageType.HeartbeatResp,
  MessageType.Unreachable,
]);

/** Responses, which are dropped when their sender is not a known peer. */
export function isResponseMessage(type: MessageType): boolean {
  return responseMessageTypes.has(type);
}

/** The response type that answers a vote request type. */
export function voteResponseType(type: MessageType): MessageType {
  if (type === MessageType.Vote) return MessageType.VoteResp;
  if (type === MessageType.PreVote) return MessageType.PreVoteResp;
  throw new Error(`not a vote message: ${type}`);
}

/** Byte-wise equality of two byte arrays. */
export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false;
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** A stable string key for opaque bytes (used to index read requests). */
export function bytesKey(bytes: Uint8Array): string {
  let out = "";
  for (const b of bytes) out += b.toString(16).padStart(2, "0");
  return out;
}

/** Node ids in a deterministic order, so message order never depends on insertion order. */
export function sortedIds(ids: Iterable<NodeId>): NodeId[] {
  return [...ids].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

/** True for the hard state of a node that never voted nor learned a term. */
export function isEmptyHardState(hs: HardState): boolean {
  return hs.term === 0 && hs.vote === null && hs.commit === 0;
}

/** Field-wise equality of hard states. */
export function hardStateEqual(a: HardState, b: HardState): boolean {
  return a.term === b.term && a.vote === b.vote && a.commit === b.commit;
}

/**
 * True when every committed entry of `rd` was durable before `rd` (none is among `rd.entries`, and
 * no snapshot replaces the log): the host may apply them while it persists `rd`.
 */
export function committedEntriesDurable(rd: Ready): boolean {
  if (rd.committedEntries.length === 0 || rd.snapshot !== null) return false;
  if (rd.entries.length === 0) return true;
  return rd.committedEntries[rd.committedEntries.length - 1].index < rd.entries[0].index;
}

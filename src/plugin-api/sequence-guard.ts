/**
 * `X-Cloud-Sequence` (spec document 3, "Client rules"): a plugin numbers its mutating POSTs with a
 * monotonic counter; the controller accepts each number once. The numbers are scoped to one start
 * of one instance (the workload token's start id, kept across rotations), because a restarted
 * server counts from 1 again. A plugin sends its reporting POSTs without waiting for each other, so
 * they may arrive out of order: a number below the highest accepted is still taken if it lies within
 * {@link sequenceWindow} of it and was not seen (the replay window of IPsec, RFC 4303 §3.4.3).
 * Kept in the key-value store, so every controller sees the same counter and a request replayed to
 * another controller after a failover is recognised as a repeat.
 */
import { KV_KEY_PREFIX } from "../coordination/keys.js";
import type { KvStore } from "../store/ports.js";
import { workloadTokenTtlMs } from "./credentials.js";

/** Numbers this far below the highest accepted may still arrive (reordered concurrent requests). */
export const sequenceWindow = 64;
/** Compare-and-set attempts before a check gives up (concurrent requests of one plugin). */
export const sequenceUpdateAttemptsMax = 64;
/**
 * The header text: a positive integer of at most 16 digits; the value must also be a safe integer
 * (at most 2^53 - 1, see {@link isSequenceValue}). The SDK counts from the wall clock in
 * microseconds, which has had 16 digits since 2001.
 */
export const SEQUENCE_HEADER_PATTERN = /^[1-9][0-9]{0,15}$/;

/** Whether the header text is an accepted sequence number. */
export function isSequenceValue(text: string): boolean {
  return SEQUENCE_HEADER_PATTERN.test(text) && Number.isSafeInteger(Number(text));
}

/** `cloud:v1:plugin-sequence:<instanceId>:<startId>`. */
export const sequenceKey = (instanceId: string, startId: string): string => `${KV_KEY_PREFIX}plugin-sequence:${instanceId}:${startId}`;

/** The outcome of one check. */
export type SequenceVerdict = "ACCEPTED" | "REPEATED" | "TOO_OLD";

interface SequenceState {
  /** Highest accepted number. */
  h: number;
  /** Accepted numbers in (h - window, h]. */
  seen: number[];
}

/** Checks and records sequence numbers. */
export class SequenceGuard {
  constructor(private readonly kv: KvStore) {}

  /** Records `sequence` for the instance's start unless it was accepted before or is too old. */
  async check(instanceId: string, startId: string, sequence: number): Promise<SequenceVerdict> {
    const key = sequenceKey(instanceId, startId);
    for (let attempt = 0; attempt < sequenceUpdateAttemptsMax; attempt++) {
      const text = await this.kv.get(key);
      const state: SequenceState = text ? (JSON.parse(text) as SequenceState) : { h: 0, seen: [] };
      const verdict = judge(state, sequence);
      if (verdict !== "ACCEPTED") return verdict;
      const h = Math.max(state.h, sequence);
      const next: SequenceState = { h, seen: [...state.seen, sequence].filter((n) => n > h - sequenceWindow).sort((a, b) => a - b) };
      const nextText = JSON.stringify(next);
      const written =
        text === null
          ? await this.kv.setIfAbsent(key, nextText, { ttlMs: workloadTokenTtlMs })
          : await this.kv.compareAndSet(key, text, nextText, { ttlMs: workloadTokenTtlMs });
      if (written) return "ACCEPTED";
    }
    throw new Error(`sequence of ${instanceId}: ${sequenceUpdateAttemptsMax} concurrent updates in a row`);
  }
}

function judge(state: SequenceState, sequence: number): SequenceVerdict {
  if (sequence > state.h) return "ACCEPTED";
  if (sequence <= state.h - sequenceWindow) return "TOO_OLD";
  return state.seen.includes(sequence) ? "REPEATED" : "ACCEPTED";
}

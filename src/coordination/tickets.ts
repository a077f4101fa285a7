/**
 * Single-use tickets for streams that cannot send an Authorization header (spec document 3, "Event
 * stream" and "Authentication"; spec document 2, log streams): 24 random bytes, URL-safe base64
 * without padding, valid for 30 seconds by default, redeemed at most once. They live in the
 * key-value store under `cloud:v1:ticket:<ticket>`, so any controller can redeem a ticket another
 * issued (with the in-memory store of the development profile they stay in process memory).
 *
 * Each ticket carries a payload naming its purpose (`kind`) and what it grants, for example
 * `{kind: "console", instanceId, username}`. Redeeming is one atomic read-and-delete, so of two
 * concurrent redeems only one gets the payload. A redeem that names a different kind gets nothing
 * and still uses the ticket up.
 */
import { randomBytes } from "node:crypto";
import { systemClock, type Clock } from "../shared/clock.js";
import { assert } from "../shared/errors.js";
import type { KvStore } from "../store/ports.js";
import { ticketKey } from "./keys.js";

/** Lifetime of a ticket (spec: SSE ticket lifetime 30 seconds). */
export const TICKET_TTL_MS_DEFAULT = 30_000;
/** Random bytes per ticket (spec: 24). */
export const TICKET_RANDOM_BYTES = 24;
/** Serialized payload size accepted by {@link Tickets.issue}. */
export const TICKET_PAYLOAD_BYTES_MAX = 4_096;

/** 24 bytes in URL-safe base64 without padding are exactly 32 characters of that alphabet. */
const TICKET_PATTERN = /^[A-Za-z0-9_-]{32}$/;

/** What a ticket grants: a purpose (`kind`) and any JSON fields that scope it. */
export interface TicketPayload {
  readonly kind: string;
  readonly [field: string]: unknown;
}

/** An issued ticket; `expiresAt` is ISO-8601 UTC. */
export interface IssuedTicket {
  readonly ticket: string;
  readonly expiresAt: string;
}

/** Options of {@link Tickets}. */
export interface TicketsOptions {
  kv: KvStore;
  ttlMs?: number;
  clock?: Clock;
  /** Source of the ticket bytes; tests may pass a seeded one. */
  randomBytes?: (size: number) => Uint8Array;
}

/** Issues and redeems single-use tickets. */
export class Tickets<P extends TicketPayload = TicketPayload> {
  private readonly kv: KvStore;
  private readonly ttlMs: number;
  private readonly clock: Clock;
  private readonly random: (size: number) => Uint8Array;

  constructor(options: TicketsOptions) {
    this.kv = options.kv;
    this.ttlMs = options.ttlMs ?? TICKET_TTL_MS_DEFAULT;
    this.clock = options.clock ?? systemClock;
    this.random = options.randomBytes ?? ((size) => randomBytes(size));
    assert(Number.isSafeInteger(this.ttlMs) && this.ttlMs > 0, "ticket ttlMs must be a positive integer");
  }

  /** Stores `payload` under a fresh ticket that expires after the TTL. */
  async issue(payload: P): Promise<IssuedTicket> {
    assert(typeof payload.kind === "string" && payload.kind !== "", "a ticket payload needs a kind");
    const serialized = JSON.stringify(payload);
    assert(Buffer.byteLength(serialized) <= TICKET_PAYLOAD_BYTES_MAX, `ticket payload above ${TICKET_PAYLOAD_BYTES_MAX} bytes`);
    const bytes = this.random(TICKET_RANDOM_BYTES);
    assert(bytes.length === TICKET_RANDOM_BYTES, `ticket source returned ${bytes.length} bytes`);
    const ticket = Buffer.from(bytes).toString("base64url");
    const expiresAtMs = this.clock.nowMs() + this.ttlMs;
    const written = await this.kv.setIfAbsent(ticketKey(ticket), serialized, { ttlMs: this.ttlMs });
    assert(written, "ticket collision: the random source repeats itself");
    return { ticket, expiresAt: new Date(expiresAtMs).toISOString() };
  }

  /**
   * Uses the ticket up and returns its payload; null when it is malformed, unknown, expired,
   * already used, or (with `kind`) issued for another purpose.
   */
  async redeem(ticket: string, kind?: string): Promise<P | null> {
    if (typeof ticket !== "string" || !TICKET_PATTERN.test(ticket)) return null;
    const stored = await this.kv.take(ticketKey(ticket));
    if (stored === null) return null;
    let payload: P;
    try {
      payload = JSON.parse(stored) as P;
    } catch {
      // An unreadable ticket is no ticket: refused like an unknown one (it is already taken).
      return null;
    }
    if (typeof payload !== "object" || payload === null || typeof payload.kind !== "string") return null;
    if (kind !== undefined && payload.kind !== kind) return null;
    return payload;
  }
}

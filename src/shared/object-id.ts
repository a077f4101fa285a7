/**
 * Time-ordered identifiers shaped like MongoDB ObjectIds: 24 lower-case hex characters made of a
 * 4-byte big-endian timestamp in seconds, a 5-byte random value fixed per generator and a 3-byte
 * counter that starts at a random value. Ids from one generator sort in creation order as strings;
 * ids from different generators sort by second. Used as the audit log's `_id` and keyset cursor.
 */
import { randomBytes } from "node:crypto";
import type { Clock } from "./clock.js";

const OBJECT_ID_PATTERN = /^[0-9a-f]{24}$/;
const COUNTER_MAX = 0xffffff;
const COUNTER_START_MASK = 0x7fffff;

/** True when `value` is a 24-character hex ObjectId (either case). */
export function isObjectId(value: string): boolean {
  return OBJECT_ID_PATTERN.test(value.toLowerCase());
}

/** The creation time encoded in an ObjectId, in epoch milliseconds (second precision). */
export function objectIdTimestampMs(id: string): number {
  return Number.parseInt(id.slice(0, 8), 16) * 1000;
}

/** Generates ObjectId-shaped ids from an injected clock; one instance per process or service. */
export class ObjectIdGenerator {
  private readonly processPart: string;
  private counter = 0;
  private lastSeconds = -1;

  constructor(
    private readonly clock: Clock,
    private readonly random: (size: number) => Uint8Array = randomBytes,
  ) {
    this.processPart = Buffer.from(random(5)).toString("hex");
  }

  /**
   * A new id, strictly greater than every earlier id of this generator. The counter restarts at a
   * random value below 2^23 each second, so it cannot wrap within that second; a clock that steps
   * back keeps using the last second seen.
   */
  next(): string {
    const seconds = Math.max(this.lastSeconds, Math.floor(this.clock.nowMs() / 1000), 0);
    if (seconds !== this.lastSeconds) {
      this.lastSeconds = seconds;
      const seed = this.random(3);
      this.counter = ((seed[0] << 16) | (seed[1] << 8) | seed[2]) & COUNTER_START_MASK;
    } else if (this.counter === COUNTER_MAX) {
      // 8 million ids in one second: borrow the next second rather than wrap out of order.
      this.lastSeconds += 1;
      this.counter = 0;
    } else {
      this.counter += 1;
    }
    const time = (this.lastSeconds >>> 0).toString(16).padStart(8, "0");
    const count = this.counter.toString(16).padStart(6, "0");
    return `${time}${this.processPart}${count}`;
  }
}

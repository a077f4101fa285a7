/**
 * Request ids of one Raft node host. A proposal's data (or a conf change's context, or a ReadIndex
 * context) starts with a marker byte and a 16-byte id: the host's random nonce, then a counter. When
 * the entry comes back committed, the host that made it recognises its own id and settles the
 * caller's promise; entries of other hosts (another leader's, or from before a restart) carry a
 * different nonce and settle nothing.
 */
import { randomBytes } from "node:crypto";

const requestMarker = 0xc1;
/** Marker byte + 8-byte nonce + 8-byte counter. */
export const requestHeaderBytes = 17;

export class RequestFraming {
  private readonly nonce = randomBytes(8);
  private counter = 0;

  /** A fresh counter; ids are never reused by this host. */
  nextCounter(): number {
    this.counter += 1;
    return this.counter;
  }

  /** `payload` behind a new request header; returns the counter and the framed bytes. */
  frame(payload: Uint8Array): { counter: number; data: Uint8Array } {
    const counter = this.nextCounter();
    const data = new Uint8Array(requestHeaderBytes + payload.byteLength);
    this.writeHeader(data, counter);
    data.set(payload, requestHeaderBytes);
    return { counter, data };
  }

  /** The counter of a request id made by this host, or null (another host's, or no header). */
  ownCounter(bytes: Uint8Array): number | null {
    if (!hasHeader(bytes)) return null;
    for (let i = 0; i < 8; i++) if (bytes[1 + i] !== this.nonce[i]) return null;
    return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getFloat64(9);
  }

  private writeHeader(target: Uint8Array, counter: number): void {
    target[0] = requestMarker;
    target.set(this.nonce, 1);
    new DataView(target.buffer, target.byteOffset, target.byteLength).setFloat64(9, counter);
  }
}

/** The bytes without a request header (whoever's it is); unframed bytes as they are. */
export function stripRequestHeader(bytes: Uint8Array): Uint8Array {
  return hasHeader(bytes) ? bytes.subarray(requestHeaderBytes) : bytes;
}

function hasHeader(bytes: Uint8Array): boolean {
  return bytes.byteLength >= requestHeaderBytes && bytes[0] === requestMarker;
}

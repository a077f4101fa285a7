/**
 * Compact binary encodings of the values that leave the core: conf changes (stored as entry
 * data) and messages (carried as bytes by the transport). Varints for numbers, length-prefixed
 * UTF-8 for strings and length-prefixed bytes. Bad input throws `MALFORMED_MESSAGE`.
 */
import { RaftError, RaftErrorCode } from "./errors.js";
import {
  type ConfChange,
  type ConfChangeSingle,
  ConfChangeTransition,
  ConfChangeType,
  type ConfState,
  type Entry,
  EntryType,
  type Message,
  MessageType,
  type Snapshot,
} from "./types.js";

const CODEC_VERSION = 1;
const utf8Encoder = new TextEncoder();
const utf8Decoder = new TextDecoder("utf-8", { fatal: true });

const messageTypes = Object.values(MessageType);
const entryTypes = Object.values(EntryType);
const changeTypes = Object.values(ConfChangeType);
const transitions = Object.values(ConfChangeTransition);

class ByteWriter {
  private chunks: number[] = [];
  private parts: Uint8Array[] = [];
  private length = 0;

  uint(value: number): void {
    if (!Number.isSafeInteger(value) || value < 0) throw new RaftError(RaftErrorCode.MalformedMessage, `cannot encode ${value} as an unsigned integer`);
    let v = value;
    while (v >= 0x80) {
      this.chunks.push((v % 0x80) | 0x80);
      v = Math.floor(v / 0x80);
    }
    this.chunks.push(v);
  }

  bool(value: boolean): void {
    this.chunks.push(value ? 1 : 0);
  }

  bytes(value: Uint8Array): void {
    this.uint(value.byteLength);
    this.flush();
    this.parts.push(value);
    this.length += value.byteLength;
  }

  string(value: string): void {
    this.bytes(utf8Encoder.encode(value));
  }

  strings(values: readonly string[]): void {
    this.uint(values.length);
    for (const v of values) this.string(v);
  }

  private flush(): void {
    if (this.chunks.length === 0) return;
    this.parts.push(Uint8Array.from(this.chunks));
    this.length += this.chunks.length;
    this.chunks = [];
  }

  finish(): Uint8Array {
    this.flush();
    const out = new Uint8Array(this.length);
    let at = 0;
    for (const p of this.parts) {
      out.set(p, at);
      at += p.byteLength;
    }
    return out;
  }
}

class ByteReader {
  private at = 0;
  constructor(private readonly buf: Uint8Array) {}

  private fail(why: string): never {
    throw new RaftError(RaftErrorCode.MalformedMessage, `${why} at byte ${this.at}`);
  }

  uint(): number {
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 8; i++) {
      if (this.at >= this.buf.byteLength) this.fail("truncated integer");
      const b = this.buf[this.at++];
      value += (b & 0x7f) * scale;
      if (b < 0x80) {
        if (!Number.isSafeInteger(value)) this.fail("integer too large");
        return value;
      }
      scale *= 0x80;
    }
    return this.fail("integer too long");
  }

  bool(): boolean {
    const v = this.uint();
    if (v > 1) this.fail("bad boolean");
    return v === 1;
  }

  bytes(): Uint8Array {
    const n = this.uint();
    if (this.at + n > this.buf.byteLength) this.fail("truncated bytes");
    const out = this.buf.slice(this.at, this.at + n);
    this.at += n;
    return out;
  }

  string(): string {
    try {
      return utf8Decoder.decode(this.bytes());
    } catch (error) {
      if (error instanceof RaftError) throw error;
      return this.fail("bad UTF-8");
    }
  }

  strings(): string[] {
    const n = this.uint();
    if (n > this.buf.byteLength) this.fail("bad list length");
    const out: string[] = [];
    for (let i = 0; i < n; i++) out.push(this.string());
    return out;
  }

  enumOf<T>(values: readonly T[], what: string): T {
    const i = this.uint();
    if (i >= values.length) this.fail(`unknown ${what} ${i}`);
    return values[i];
  }

  end(): void {
    if (this.at !== this.buf.byteLength) this.fail("trailing bytes");
  }
}

function writeConfChange(w: ByteWriter, cc: ConfChange): void {
  w.uint(transitions.indexOf(cc.transition ?? ConfChangeTransition.Auto));
  w.uint(cc.changes.length);
  for (const c of cc.changes) {
    w.uint(changeTypes.indexOf(c.type));
    w.string(c.nodeId);
  }
  w.bool(cc.context !== undefined);
  if (cc.context !== undefined) w.bytes(cc.context);
}

function readConfChange(r: ByteReader): ConfChange {
  const transition = r.enumOf(transitions, "transition");
  const n = r.uint();
  const changes: ConfChangeSingle[] = [];
  for (let i = 0; i < n; i++) {
    const type = r.enumOf(changeTypes, "conf change type");
    changes.push({ type, nodeId: r.string() });
  }
  const hasContext = r.bool();
  const cc: ConfChange = hasContext ? { changes, transition, context: r.bytes() } : { changes, transition };
  return cc;
}

/** Encodes a conf change as the data of a conf-change entry. */
export function encodeConfChange(cc: ConfChange): Uint8Array {
  const w = new ByteWriter();
  w.uint(CODEC_VERSION);
  writeConfChange(w, cc);
  return w.finish();
}

/** Decodes the data of a conf-change entry; throws `MALFORMED_MESSAGE` on bad input. */
export function decodeConfChange(data: Uint8Array): ConfChange {
  const r = new ByteReader(data);
  if (r.uint() !== CODEC_VERSION) throw new RaftError(RaftErrorCode.MalformedMessage, "unknown conf change encoding version");
  const cc = readConfChange(r);
  r.end();
  return cc;
}

function writeConfState(w: ByteWriter, cs: ConfState): void {
  w.strings(cs.voters);
  w.strings(cs.learners);
  w.strings(cs.votersOutgoing);
  w.strings(cs.learnersNext);
  w.bool(cs.autoLeave);
}

function readConfState(r: ByteReader): ConfState {
  return { voters: r.strings(), learners: r.strings(), votersOutgoing: r.strings(), learnersNext: r.strings(), autoLeave: r.bool() };
}

function writeEntry(w: ByteWriter, e: Entry): void {
  w.uint(e.term);
  w.uint(e.index);
  w.uint(entryTypes.indexOf(e.type));
  w.bytes(e.data);
}

function readEntry(r: ByteReader): Entry {
  return { term: r.uint(), index: r.uint(), type: r.enumOf(entryTypes, "entry type"), data: r.bytes() };
}

function writeSnapshot(w: ByteWriter, s: Snapshot): void {
  w.uint(s.metadata.index);
  w.uint(s.metadata.term);
  writeConfState(w, s.metadata.confState);
  w.bytes(s.data);
}

function readSnapshot(r: ByteReader): Snapshot {
  const index = r.uint();
  const term = r.uint();
  const confState = readConfState(r);
  return { metadata: { index, term, confState }, data: r.bytes() };
}

/** Encodes a message for the transport. */
export function encodeMessage(m: Message): Uint8Array {
  const w = new ByteWriter();
  w.uint(CODEC_VERSION);
  w.uint(messageTypes.indexOf(m.type));
  w.string(m.from);
  w.string(m.to);
  w.uint(m.term);
  w.uint(m.logTerm);
  w.uint(m.index);
  w.uint(m.commit);
  w.bool(m.reject);
  w.uint(m.rejectHint);
  w.bytes(m.context);
  w.uint(m.entries.length);
  for (const e of m.entries) writeEntry(w, e);
  w.bool(m.snapshot !== null);
  if (m.snapshot !== null) writeSnapshot(w, m.snapshot);
  return w.finish();
}

/** Decodes a message from the transport; throws `MALFORMED_MESSAGE` on bad input. */
export function decodeMessage(data: Uint8Array): Message {
  const r = new ByteReader(data);
  if (r.uint() !== CODEC_VERSION) throw new RaftError(RaftErrorCode.MalformedMessage, "unknown message encoding version");
  const type = r.enumOf(messageTypes, "message type");
  const from = r.string();
  const to = r.string();
  const term = r.uint();
  const logTerm = r.uint();
  const index = r.uint();
  const commit = r.uint();
  const reject = r.bool();
  const rejectHint = r.uint();
  const context = r.bytes();
  const n = r.uint();
  if (n > data.byteLength) throw new RaftError(RaftErrorCode.MalformedMessage, "bad entry count");
  const entries: Entry[] = [];
  for (let i = 0; i < n; i++) entries.push(readEntry(r));
  const snapshot = r.bool() ? readSnapshot(r) : null;
  r.end();
  return { type, from, to, term, logTerm, index, commit, reject, rejectHint, context, entries, snapshot };
}

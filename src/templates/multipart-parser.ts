/**
 * An incremental multipart/form-data parser (RFC 7578 framing, RFC 2046 section 5.1.1): bytes go in
 * as they arrive, and part starts, body bytes and part ends come out. It keeps at most one header
 * block and the few bytes that could begin a delimiter, so a body of any size passes through without
 * being held. No I/O: the caller reads the stream and decides where part bodies go.
 */
import { badRequest, validationError } from "../shared/errors.js";

/** Bounds of one multipart body. */
export interface MultipartLimits {
  /** Most parts (fields and files) one body may carry. */
  partsMax: number;
  /** Longest header block of one part, in bytes. */
  headerBytesMax: number;
}

/** Defaults: enough for a folder of plugins per request, far from what would exhaust memory. */
export const DEFAULT_MULTIPART_LIMITS: MultipartLimits = { partsMax: 1000, headerBytesMax: 16 * 1024 };

/** The headers of one part that matter here. */
export interface PartHeaders {
  /** The form field name (`name` of Content-Disposition); empty when absent. */
  name: string;
  /** The file name (`filename*` or `filename`), absent for plain fields. */
  fileName?: string;
}

/** What one push produced, in order. */
export type MultipartEvent = { type: "part"; part: PartHeaders } | { type: "data"; bytes: Uint8Array } | { type: "part-end" };

/** Longest boundary RFC 2046 allows. */
const BOUNDARY_LENGTH_MAX = 70;
/** Most bytes of transport padding accepted between a delimiter and its line end. */
const DELIMITER_PADDING_BYTES_MAX = 64;
const CRLF = Buffer.from("\r\n");
const HEADER_END = Buffer.from("\r\n\r\n");
const EMPTY = Buffer.alloc(0);

type State = "preamble" | "delimiter" | "headers" | "body" | "done";

function malformed(reason: string): Error {
  return badRequest(`Malformed multipart body: ${reason}`);
}

/** The boundary of a `multipart/form-data` content type; 400 for any other type or a bad boundary. */
export function multipartBoundary(contentType: string | undefined): string {
  const [type, ...params] = (contentType ?? "").split(";");
  if (type.trim().toLowerCase() !== "multipart/form-data") throw badRequest("Expected a multipart/form-data body");
  for (const param of params) {
    const eq = param.indexOf("=");
    if (eq < 0 || param.slice(0, eq).trim().toLowerCase() !== "boundary") continue;
    let value = param.slice(eq + 1).trim();
    if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1);
    if (value.length === 0 || value.length > BOUNDARY_LENGTH_MAX) throw malformed(`boundary must be 1 to ${BOUNDARY_LENGTH_MAX} characters`);
    return value;
  }
  throw malformed("no boundary in the content type");
}

/** Parses the multipart body delimited by `boundary`; see the module comment. */
export class MultipartParser {
  private readonly delimiter: Buffer;
  // The body is read as if it began with CRLF, so the first delimiter matches like every other one.
  private pending: Buffer = Buffer.from(CRLF);
  private state: State = "preamble";
  private parts = 0;

  constructor(
    boundary: string,
    private readonly limits: MultipartLimits = DEFAULT_MULTIPART_LIMITS,
  ) {
    this.delimiter = Buffer.from(`\r\n--${boundary}`);
  }

  /** Feeds the next bytes; returns what they completed. Body bytes are views of the input. */
  push(chunk: Uint8Array): MultipartEvent[] {
    const events: MultipartEvent[] = [];
    this.absorb(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength), events);
    while (this.step(events));
    return events;
  }

  /** Declares the end of the input; 400 unless the closing delimiter was seen. */
  end(): void {
    if (this.state !== "done") throw malformed("the body ends before the closing boundary");
  }

  /**
   * Appends `input` to the pending bytes. Inside a body the pending bytes are only the few that could
   * start a delimiter; when no delimiter starts there, they are body bytes and `input` is taken as it
   * is, so body bytes are never copied.
   */
  private absorb(input: Buffer, events: MultipartEvent[]): void {
    if (this.pending.length === 0) {
      this.pending = input;
      return;
    }
    if (this.state === "body" && input.length >= this.delimiter.length) {
      const bridge = Buffer.concat([this.pending, input.subarray(0, this.delimiter.length - 1)]);
      const at = bridge.indexOf(this.delimiter);
      if (at < 0 || at >= this.pending.length) {
        events.push({ type: "data", bytes: this.pending });
        this.pending = input;
        return;
      }
    }
    this.pending = Buffer.concat([this.pending, input]);
  }

  /** Advances by one state transition; false when more input is needed. */
  private step(events: MultipartEvent[]): boolean {
    switch (this.state) {
      case "preamble":
        return this.skipTo("delimiter");
      case "delimiter":
        return this.endDelimiterLine();
      case "headers":
        return this.readHeaders(events);
      case "body":
        return this.readBody(events);
      case "done":
        this.pending = EMPTY; // the epilogue is ignored
        return false;
    }
  }

  private skipTo(next: State): boolean {
    const at = this.pending.indexOf(this.delimiter);
    if (at < 0) {
      this.pending = this.keepPossibleDelimiterStart();
      return false;
    }
    this.pending = this.pending.subarray(at + this.delimiter.length);
    this.state = next;
    return true;
  }

  /** After a delimiter: `--` closes the body; otherwise optional padding, then CRLF, then headers. */
  private endDelimiterLine(): boolean {
    if (this.pending.length < 2) return false;
    if (this.pending[0] === 0x2d && this.pending[1] === 0x2d) {
      this.state = "done";
      return true;
    }
    const eol = this.pending.indexOf(CRLF);
    if (eol < 0) {
      if (this.pending.length > DELIMITER_PADDING_BYTES_MAX) throw malformed("a boundary line does not end");
      return false;
    }
    for (const byte of this.pending.subarray(0, eol)) if (byte !== 0x20 && byte !== 0x09) throw malformed("text after a boundary");
    this.pending = this.pending.subarray(eol + CRLF.length);
    this.state = "headers";
    return true;
  }

  private readHeaders(events: MultipartEvent[]): boolean {
    let block: Buffer;
    if (this.pending.length >= 2 && this.pending[0] === 0x0d && this.pending[1] === 0x0a) {
      block = EMPTY;
      this.pending = this.pending.subarray(CRLF.length);
    } else {
      const at = this.pending.indexOf(HEADER_END);
      if (at < 0 && this.pending.length > this.limits.headerBytesMax) throw malformed(`a part's headers exceed ${this.limits.headerBytesMax} bytes`);
      if (at < 0) return false;
      if (at > this.limits.headerBytesMax) throw malformed(`a part's headers exceed ${this.limits.headerBytesMax} bytes`);
      block = this.pending.subarray(0, at);
      this.pending = this.pending.subarray(at + HEADER_END.length);
    }
    if (++this.parts > this.limits.partsMax) throw validationError(`file: more than ${this.limits.partsMax} parts in one request`);
    events.push({ type: "part", part: parsePartHeaders(block.toString("utf8")) });
    this.state = "body";
    return true;
  }

  private readBody(events: MultipartEvent[]): boolean {
    const at = this.pending.indexOf(this.delimiter);
    if (at < 0) {
      const kept = this.keepPossibleDelimiterStart();
      if (kept.length < this.pending.length) events.push({ type: "data", bytes: this.pending.subarray(0, this.pending.length - kept.length) });
      this.pending = kept;
      return false;
    }
    if (at > 0) events.push({ type: "data", bytes: this.pending.subarray(0, at) });
    events.push({ type: "part-end" });
    this.pending = this.pending.subarray(at + this.delimiter.length);
    this.state = "delimiter";
    return true;
  }

  /** The tail of the pending bytes that could be the start of a delimiter split across pushes. */
  private keepPossibleDelimiterStart(): Buffer {
    const keep = Math.min(this.pending.length, this.delimiter.length - 1);
    return this.pending.subarray(this.pending.length - keep);
  }
}

/** Name and file name from a part's header block (Content-Disposition only; others are ignored). */
export function parsePartHeaders(block: string): PartHeaders {
  for (const line of block.split("\r\n")) {
    const colon = line.indexOf(":");
    if (colon < 0 || line.slice(0, colon).trim().toLowerCase() !== "content-disposition") continue;
    const params = dispositionParams(line.slice(colon + 1));
    const fileName = decodeExtended(params.get("filename*")) ?? params.get("filename");
    return { name: params.get("name") ?? "", ...(fileName !== undefined ? { fileName } : {}) };
  }
  return { name: "" };
}

/**
 * The parameters of a Content-Disposition value. Quoted values end at the next quote and keep
 * backslashes as they are: clients percent-encode quotes in names, and a backslash in a file name
 * must reach the path rules (which refuse it) rather than vanish as an escape.
 */
function dispositionParams(value: string): Map<string, string> {
  const params = new Map<string, string>();
  let at = value.indexOf(";");
  while (at >= 0 && at < value.length) {
    const eq = value.indexOf("=", at + 1);
    if (eq < 0) break;
    const key = value
      .slice(at + 1, eq)
      .trim()
      .toLowerCase();
    let start = eq + 1;
    while (value[start] === " " || value[start] === "\t") start++;
    let end: number;
    let text: string;
    if (value[start] === '"') {
      const close = value.indexOf('"', start + 1);
      end = close < 0 ? value.length : close + 1;
      text = value.slice(start + 1, close < 0 ? value.length : close);
    } else {
      const semicolon = value.indexOf(";", start);
      end = semicolon < 0 ? value.length : semicolon;
      text = value.slice(start, end).trim();
    }
    if (!params.has(key)) params.set(key, text);
    at = value.indexOf(";", end);
  }
  return params;
}

/** An RFC 8187 `charset'lang'percent-encoded` value; undefined when absent or not UTF-8. */
function decodeExtended(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const match = /^utf-8'[^']*'(.*)$/i.exec(value);
  if (!match) return undefined;
  try {
    return decodeURIComponent(match[1]);
  } catch {
    // Malformed percent-encoding: treated as absent, so the plain parameter is used.
    return undefined;
  }
}

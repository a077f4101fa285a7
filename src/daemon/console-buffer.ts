/**
 * Console plumbing for one instance: a splitter that turns a byte stream into bounded lines, and a
 * ring buffer that keeps the last `capacityLines` of them for late readers and crash reports.
 */
import { StringDecoder } from "node:string_decoder";

/** One console line as the runner reports it (INSTANCE_CONSOLE_OUTPUT carries line + timestampMs). */
export interface ConsoleLine {
  line: string;
  stream: "stdout" | "stderr";
  timestampMs: number;
}

/** Keeps the most recent lines; older ones are overwritten. */
export class ConsoleRingBuffer {
  private readonly lines: ConsoleLine[] = [];
  private next = 0;

  constructor(readonly capacityLines: number) {
    if (!Number.isInteger(capacityLines) || capacityLines < 1) throw new RangeError("capacityLines must be a positive integer");
  }

  push(line: ConsoleLine): void {
    if (this.lines.length < this.capacityLines) this.lines.push(line);
    else this.lines[this.next] = line;
    this.next = (this.next + 1) % this.capacityLines;
  }

  /** The last `count` lines (all kept lines by default), oldest first. */
  tail(count = this.capacityLines): ConsoleLine[] {
    const ordered = this.lines.length < this.capacityLines ? this.lines.slice() : [...this.lines.slice(this.next), ...this.lines.slice(0, this.next)];
    return count >= ordered.length ? ordered : ordered.slice(ordered.length - Math.max(0, count));
  }

  get size(): number {
    return this.lines.length;
  }
}

/**
 * Splits chunks into lines (LF or CRLF). A line longer than `lineMaxChars` is cut there and the rest
 * starts a new line, so a process that never prints a newline cannot grow memory without bound.
 */
export class LineSplitter {
  private readonly decoder = new StringDecoder("utf8");
  private pending = "";

  constructor(
    private readonly lineMaxChars: number,
    private readonly onLine: (line: string) => void,
  ) {}

  write(chunk: Buffer): void {
    this.pending += this.decoder.write(chunk);
    let newline = this.pending.indexOf("\n");
    while (newline >= 0) {
      this.emit(this.pending.slice(0, newline));
      this.pending = this.pending.slice(newline + 1);
      newline = this.pending.indexOf("\n");
    }
    while (this.pending.length > this.lineMaxChars) {
      this.onLine(this.pending.slice(0, this.lineMaxChars));
      this.pending = this.pending.slice(this.lineMaxChars);
    }
  }

  /** Emits what is left (a last line without a newline). */
  end(): void {
    this.pending += this.decoder.end();
    if (this.pending !== "") this.emit(this.pending);
    this.pending = "";
  }

  private emit(line: string): void {
    const text = line.endsWith("\r") ? line.slice(0, -1) : line;
    for (let start = 0; start < text.length || start === 0; start += this.lineMaxChars) {
      this.onLine(text.slice(start, start + this.lineMaxChars));
      if (text.length === 0) break;
    }
  }
}

/**
 * Human output of cloudctl: tables (cli-table3, Unicode or `--ascii` borders), colours
 * (picocolors; off with `--no-color`, `--json`, NO_COLOR or when stdout is not a terminal), the
 * accent colour, and the small formatters the spec fixes (sizes, hash prefixes, group status).
 */
import Table from "cli-table3";
import pc from "picocolors";
import type { Accent } from "./config-file.js";

type Colors = ReturnType<typeof pc.createColors>;

/** How output is rendered for this invocation. */
export interface RenderOptions {
  json: boolean;
  color: boolean;
  ascii: boolean;
  accent: Accent;
}

const asciiChars = {
  top: "-",
  "top-mid": "+",
  "top-left": "+",
  "top-right": "+",
  bottom: "-",
  "bottom-mid": "+",
  "bottom-left": "+",
  "bottom-right": "+",
  left: "|",
  "left-mid": "+",
  mid: "-",
  "mid-mid": "+",
  right: "|",
  "right-mid": "+",
  middle: "|",
};

/** Borderless Unicode layout: headers over rows, like kubectl. */
const plainChars = {
  top: "",
  "top-mid": "",
  "top-left": "",
  "top-right": "",
  bottom: "",
  "bottom-mid": "",
  "bottom-left": "",
  "bottom-right": "",
  left: "",
  "left-mid": "",
  mid: "",
  "mid-mid": "",
  right: "",
  "right-mid": "",
  middle: "  ",
};

/** Writes command output; every command prints through one of these. */
export class Output {
  readonly colors: Colors;
  constructor(
    readonly options: RenderOptions,
    private readonly out: (text: string) => void = (text) => process.stdout.write(text),
    private readonly err: (text: string) => void = (text) => process.stderr.write(text),
  ) {
    this.colors = pc.createColors(options.color);
  }

  get json(): boolean {
    return this.options.json;
  }

  /** Colours a heading or name in the configured accent. */
  accent(text: string): string {
    const c = this.colors;
    switch (this.options.accent) {
      case "cyan":
        return c.cyan(text);
      case "green":
        return c.green(text);
      case "amber":
        return c.yellow(text);
      default:
        return c.magenta(text);
    }
  }

  /** Prints one line to stdout. */
  line(text = ""): void {
    this.out(`${text}\n`);
  }

  /** Prints a notice to stderr (prompts, progress, warnings): keeps stdout clean for pipes. */
  note(text: string): void {
    this.err(`${text}\n`);
  }

  /** Prints a server body exactly as received (a trailing newline is added when missing). */
  raw(body: string): void {
    this.out(body.endsWith("\n") ? body : `${body}\n`);
  }

  /** Prints a locally built value as JSON. */
  jsonValue(value: unknown): void {
    this.out(`${JSON.stringify(value, null, 2)}\n`);
  }

  /** Renders a table; the first row is the header. */
  table(headers: string[], rows: (string | number)[][]): void {
    if (rows.length === 0) {
      this.line(this.colors.dim("(none)"));
      return;
    }
    const table = new Table({
      head: headers.map((h) => this.accent(h)),
      chars: this.options.ascii ? asciiChars : plainChars,
      style: { head: [], border: [], "padding-left": this.options.ascii ? 1 : 0, "padding-right": this.options.ascii ? 1 : 0 },
    });
    for (const row of rows) table.push(row.map((cell) => String(cell)));
    this.line(
      table
        .toString()
        .split("\n")
        .map((l) => l.trimEnd())
        .join("\n"),
    );
  }

  /** Renders `key: value` lines with aligned keys. */
  fields(pairs: [string, unknown][]): void {
    const width = Math.max(...pairs.map(([k]) => k.length));
    for (const [key, value] of pairs) this.line(`${this.accent(key.padEnd(width))}  ${display(value)}`);
  }

  /** Colours a state word: green for healthy, yellow for transitional, red for failed. */
  state(value: string): string {
    const c = this.colors;
    if (["UP", "RUNNING", "ONLINE", "ACTIVE", "READY"].includes(value)) return c.green(value);
    if (["DOWN", "CRASHED", "OFFLINE", "UNREACHABLE", "NOT_READY", "REVOKED"].includes(value)) return c.red(value);
    return c.yellow(value);
  }

  /** A success line with a check mark (`*` in ASCII mode). */
  success(text: string): void {
    this.line(`${this.colors.green(this.options.ascii ? "*" : "✔")} ${text}`);
  }
}

/** Formats any value for a table cell: empty for null/undefined, JSON for objects. */
export function display(value: unknown): string {
  if (value === null || value === undefined) return "";
  if (Array.isArray(value)) return value.map(display).join(", ");
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

/** Sizes as the template list shows them: bytes as `B`, else one decimal `KB` or `MB` (1024 steps). */
export function formatBytes(bytes: number | undefined): string {
  if (bytes === undefined || bytes === null || !Number.isFinite(bytes)) return "";
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
}

/** First eight characters of a content hash. */
export function shortHash(hash: string | undefined): string {
  return (hash ?? "").slice(0, 8);
}

/** Fields the derived group status reads. */
export interface GroupStatusInput {
  maintenance?: boolean;
  runningInstances?: number;
  minInstances?: number;
}

/** Client-side group status: DRAIN when in maintenance; DOWN when nothing runs but some should; otherwise UP. */
export function groupStatus(group: GroupStatusInput): "UP" | "DOWN" | "DRAIN" {
  if (group.maintenance) return "DRAIN";
  if ((group.runningInstances ?? 0) === 0 && (group.minInstances ?? 0) > 0) return "DOWN";
  return "UP";
}

/** Milliseconds as a short duration: `45s`, `12m`, `3h 5m`, `2d 4h`. */
export function formatDuration(ms: number | undefined): string {
  if (ms === undefined || ms === null || !Number.isFinite(ms) || ms < 0) return "";
  const seconds = Math.floor(ms / 1000);
  if (seconds < 60) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 24) return `${hours}h ${minutes % 60}m`;
  return `${Math.floor(hours / 24)}d ${hours % 24}h`;
}

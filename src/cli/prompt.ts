/**
 * Questions on the terminal or on piped stdin. Prompts go to stderr so stdout stays parseable.
 * Piped input is read line by line from one shared buffer (several readline instances on one
 * pipe would lose lines already buffered by the first). Secrets are not echoed on a terminal.
 */
import { Writable } from "node:stream";
import { createInterface } from "node:readline";

/** Longest answer line accepted from a pipe; guards against reading a huge file as one answer. */
export const answerLengthMaxChars = 64 * 1024;

/** Reads answers from stdin; created per invocation and closed before exit. */
export class Prompter {
  private buffer = "";
  private ended = false;
  private waiting: (() => void) | null = null;
  private attached = false;

  constructor(
    private readonly stdin: NodeJS.ReadStream = process.stdin,
    private readonly stderr: NodeJS.WriteStream = process.stderr,
  ) {}

  /** True when stdin is an interactive terminal. */
  get interactive(): boolean {
    return Boolean(this.stdin.isTTY);
  }

  /** Asks a question and returns the answer without its line ending, or null when stdin ended. */
  async ask(question: string, options: { secret?: boolean } = {}): Promise<string | null> {
    if (this.interactive) return this.askTerminal(question, options.secret ?? false);
    this.stderr.write(question);
    const line = await this.nextLine();
    if (options.secret || line === null) this.stderr.write("\n");
    return line;
  }

  /** Asks a yes/no question; only `y` or `yes` (any case) is a yes; end of input is a no. */
  async confirm(question: string): Promise<boolean> {
    const answer = await this.ask(`${question} [y/N] `);
    return answer !== null && /^(y|yes)$/i.test(answer.trim());
  }

  private askTerminal(question: string, secret: boolean): Promise<string | null> {
    let muted = false;
    const output = new Writable({
      write: (chunk, _encoding, callback) => {
        if (!muted) this.stderr.write(chunk);
        callback();
      },
    });
    const rl = createInterface({ input: this.stdin, output, terminal: true });
    return new Promise((resolve) => {
      let answered = false;
      rl.question(question, (answer) => {
        answered = true;
        if (secret) this.stderr.write("\n");
        rl.close();
        resolve(answer);
      });
      muted = secret;
      rl.on("close", () => {
        if (!answered) resolve(null);
      });
    });
  }

  private attach(): void {
    if (this.attached) return;
    this.attached = true;
    this.stdin.setEncoding("utf8");
    this.stdin.on("data", (chunk: string) => {
      this.buffer += chunk;
      if (this.buffer.length > answerLengthMaxChars && !this.buffer.includes("\n")) this.buffer = this.buffer.slice(0, answerLengthMaxChars);
      this.wake();
    });
    this.stdin.on("end", () => {
      this.ended = true;
      this.wake();
    });
    this.stdin.on("error", () => {
      this.ended = true;
      this.wake();
    });
  }

  private wake(): void {
    const waiting = this.waiting;
    this.waiting = null;
    waiting?.();
  }

  private async nextLine(): Promise<string | null> {
    this.attach();
    this.stdin.resume();
    while (true) {
      const newline = this.buffer.indexOf("\n");
      if (newline >= 0) {
        const line = this.buffer.slice(0, newline).replace(/\r$/, "");
        this.buffer = this.buffer.slice(newline + 1);
        this.stdin.pause();
        return line;
      }
      if (this.ended) {
        if (this.buffer === "") return null;
        const line = this.buffer;
        this.buffer = "";
        return line;
      }
      await new Promise<void>((resolve) => (this.waiting = resolve));
    }
  }

  /** Releases stdin so it no longer keeps the process alive. */
  close(): void {
    if (this.attached) {
      this.stdin.pause();
      this.stdin.removeAllListeners("data");
    }
  }
}

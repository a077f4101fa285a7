/**
 * How the instance runner starts processes. `spawn()` forks the calling process and blocks its
 * event loop until the child has exec'd; the time grows with the caller's memory (page tables are
 * copied, then torn down in the child): about 14 ms per spawn for a daemon of 150 MB, against
 * 2 ms for a 45 MB process. A daemon starting hundreds of instances would spend a third of its
 * time blocked there, and every stream message it owes the controller would wait.
 *
 * {@link SpawnerLauncher} hands the spawns to a small helper process (`spawner/spawner.cjs`) which
 * passes the pipes of each new process back over its IPC channel: the daemon reads stdout and
 * stderr and writes stdin itself, signals the process group itself, and learns the exit status
 * from the helper. {@link directLauncher} spawns in the calling process (tests, and the fallback
 * when the helper cannot run). Decisions: docs/decisions/daemon-runner.md.
 */
import { fork, spawn, type ChildProcess } from "node:child_process";
import { EventEmitter } from "node:events";
import type { Readable, Writable } from "node:stream";
import { fileURLToPath } from "node:url";

/**
 * A started process, as the runner uses it. Events, as on a ChildProcess: `spawn` (pid and the
 * three streams are set), `error` (it could not start; no other event follows), `exit` (code,
 * signal), `close` (after `exit`, once stdout and stderr have ended).
 */
export interface LaunchedProcess {
  readonly pid?: number | undefined;
  readonly stdin: Writable | null;
  readonly stdout: Readable | null;
  readonly stderr: Readable | null;
  once(event: "spawn", listener: () => void): this;
  once(event: "error", listener: (error: Error) => void): this;
  once(event: "exit", listener: (code: number | null, signal: NodeJS.Signals | null) => void): this;
  once(event: "close", listener: () => void): this;
}

/** What the launcher needs to start one process. */
export interface LaunchRequest {
  file: string;
  args: readonly string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
}

/** Starts processes detached (their own process group), with three pipes. */
export interface ProcessLauncher {
  launch(request: LaunchRequest): LaunchedProcess;
  /** Ends the launcher's own resources; processes already started are not touched. */
  close(): Promise<void>;
}

/** Spawns in the calling process. */
export const directLauncher: ProcessLauncher = {
  launch(request: LaunchRequest): ChildProcess {
    return spawn(request.file, [...request.args], { cwd: request.cwd, env: request.env, detached: true, stdio: ["pipe", "pipe", "pipe"] });
  },
  async close(): Promise<void> {},
};

/** Absolute path of spawner.cjs, beside this module from source and in the build output alike (`npm run build` copies it). */
export function spawnerScriptPath(): string {
  return fileURLToPath(new URL("./spawner/spawner.cjs", import.meta.url));
}

type SpawnerMessage =
  | { type: "spawned"; id: string; pid: number }
  | { type: "stdio"; id: string; stream: "stdout" | "stderr" }
  | { type: "spawn-error"; id: string; code: string; message: string }
  | { type: "exit"; id: string; code: number | null; signal: NodeJS.Signals | null };

/** A process started through the helper: streams arrive as handles, the exit as a message. */
class RemoteProcess extends EventEmitter implements LaunchedProcess {
  pid: number | undefined = undefined;
  stdin: Writable | null = null;
  stdout: Readable | null = null;
  stderr: Readable | null = null;
  started = false;
  exited = false;
  /** `error` or `close` was emitted: nothing more will be. */
  done = false;
  private openStreams = 2;

  constructor(private readonly onDone: () => void) {
    super();
  }

  /** A message (and its handle) about this process. */
  receive(message: SpawnerMessage, handle: unknown): void {
    switch (message.type) {
      case "spawned":
        this.pid = message.pid;
        this.stdin = handle as Writable;
        break;
      case "stdio": {
        const stream = handle as Readable;
        if (message.stream === "stdout") this.stdout = stream;
        else this.stderr = stream;
        stream.once("close", () => {
          this.openStreams -= 1;
          this.maybeClose();
        });
        break;
      }
      case "spawn-error":
        this.fail(Object.assign(new Error(message.message), { code: message.code }));
        return;
      case "exit":
        this.exit(message.code, message.signal);
        return;
    }
    if (!this.started && this.pid !== undefined && this.stdin && this.stdout && this.stderr) {
      this.started = true;
      this.emit("spawn");
    }
  }

  /** It could not be started. */
  fail(error: Error): void {
    if (this.started || this.done) return;
    this.done = true;
    for (const stream of [this.stdin, this.stdout, this.stderr]) stream?.destroy();
    // Started, but not every pipe arrived (the helper died in between): not ours to run half-wired.
    if (this.pid !== undefined) {
      try {
        process.kill(-this.pid, "SIGKILL");
      } catch {
        // ESRCH: already gone.
      }
    }
    this.emit("error", error);
    this.onDone();
  }

  /** The exit status; null, null when the helper died before it could tell. */
  exit(code: number | null, signal: NodeJS.Signals | null): void {
    if (!this.started || this.exited) return;
    this.exited = true;
    // As a ChildProcess does: nothing reads the other end of stdin any more.
    this.stdin?.destroy();
    this.emit("exit", code, signal);
    this.maybeClose();
  }

  /** Both output pipes have closed. */
  get outputEnded(): boolean {
    return this.openStreams === 0;
  }

  private maybeClose(): void {
    if (this.done || !this.exited || this.openStreams > 0) return;
    this.done = true;
    this.emit("close");
    this.onDone();
  }
}

/** While the helper is gone: how often a process it started is checked for having ended. */
const orphanPollIntervalMs = 250;
/** Checks after its pipes ended before an unreaped (zombie) orphan is taken as exited. */
const orphanPollsAfterOutputMax = 8;

/** Spawner helpers a launcher runs by default. */
export const spawnerHelpersDefault = 2;

/** One helper process and the processes it started that have not closed yet. */
interface Helper {
  child: ChildProcess;
  processes: Map<string, RemoteProcess>;
}

/**
 * Starts processes through spawner helpers (`helpers` of them, default 2), each started on first
 * use and again after it died; launches go to them in turn. More than one, because a spawn waits
 * until the new process has exec'd, and on a machine busy with booting servers that process waits
 * for a CPU: one helper spawned about 30 a second there, two in parallel do not wait for each
 * other. Processes a helper started keep running when it dies (their pipes are the daemon's);
 * they are reported exited with an unknown status (null, null) once their pipes have closed and
 * their pid is gone.
 */
export class SpawnerLauncher implements ProcessLauncher {
  private readonly helpers: (Helper | null)[];
  private nextId = 1;
  private closing = false;

  constructor(private readonly options: { scriptPath?: string; helpers?: number } = {}) {
    const count = options.helpers ?? spawnerHelpersDefault;
    if (!Number.isInteger(count) || count < 1) throw new Error(`spawner helpers must be a positive integer (got ${count})`);
    this.helpers = new Array<Helper | null>(count).fill(null);
  }

  /** The pids of the helpers that run now. */
  get helperPids(): number[] {
    return this.helpers.flatMap((helper) => (helper?.child.pid === undefined ? [] : [helper.child.pid]));
  }

  launch(request: LaunchRequest): LaunchedProcess {
    const n = this.nextId++;
    const id = String(n);
    if (this.closing) {
      const refused = new RemoteProcess(() => undefined);
      queueMicrotask(() => refused.fail(new Error("the process launcher is closed")));
      return refused;
    }
    const helper = this.ensureHelper(n % this.helpers.length);
    const target = new RemoteProcess(() => helper.processes.delete(id));
    helper.processes.set(id, target);
    const message = { type: "spawn", id, file: request.file, args: request.args, cwd: request.cwd, env: request.env };
    const failed = (error: Error | null) => {
      if (error) queueMicrotask(() => target.fail(error));
    };
    try {
      helper.child.send(message, failed);
    } catch (error) {
      failed(error instanceof Error ? error : new Error(String(error)));
    }
    return target;
  }

  async close(): Promise<void> {
    this.closing = true;
    const running = this.helpers.flatMap((helper) => (helper ? [helper.child] : []));
    this.helpers.fill(null);
    await Promise.all(
      running.map((child) => {
        if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
        return new Promise<void>((resolve) => {
          const kill = setTimeout(() => child.kill("SIGKILL"), 2_000);
          child.once("exit", () => {
            clearTimeout(kill);
            resolve();
          });
          if (child.connected) child.disconnect();
          else child.kill("SIGKILL");
        });
      }),
    );
  }

  private ensureHelper(slot: number): Helper {
    const existing = this.helpers[slot];
    if (existing?.child.connected) return existing;
    const child = fork(this.options.scriptPath ?? spawnerScriptPath(), [], {
      stdio: ["ignore", "ignore", "inherit", "ipc"],
      env: { PATH: process.env.PATH ?? "" },
      // Plain JavaScript: none of the daemon's own Node options (a TypeScript loader).
      execArgv: [],
    });
    const helper: Helper = { child, processes: new Map() };
    this.helpers[slot] = helper;
    child.on("message", (message: SpawnerMessage, handle: unknown) => {
      const target = helper.processes.get(message.id);
      if (target) target.receive(message, handle);
      // A handle for a process no longer tracked is closed, not leaked.
      else (handle as { destroy?: () => void } | undefined)?.destroy?.();
    });
    child.once("exit", () => {
      if (this.helpers[slot] === helper) this.helpers[slot] = null;
      helperLost(helper);
    });
    // A helper that fails is no longer connected: the next launch forks a new one.
    child.on("error", () => undefined);
    return helper;
  }
}

/**
 * A helper died: launches it had not answered fail; processes it started are watched until their
 * pipes close and their pid is gone, then reported exited with an unknown status.
 */
function helperLost(helper: Helper): void {
  for (const target of [...helper.processes.values()]) {
    if (!target.started) {
      target.fail(new Error("the spawner helper exited before starting the process"));
      continue;
    }
    if (target.exited) continue;
    let pollsAfterOutput = 0;
    const watch = setInterval(() => {
      if (target.exited || target.done) return clearInterval(watch);
      if (!target.outputEnded) return;
      pollsAfterOutput += 1;
      if (isAlive(target.pid) && pollsAfterOutput < orphanPollsAfterOutputMax) return;
      clearInterval(watch);
      target.exit(null, null);
    }, orphanPollIntervalMs);
    watch.unref();
  }
}

function isAlive(pid: number | undefined): boolean {
  if (pid === undefined) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // ESRCH: no such process. EPERM: it exists but belongs to someone else, so it is alive.
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

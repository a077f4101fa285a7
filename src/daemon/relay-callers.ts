/**
 * Who is calling the plugin relay (docs/decisions/plugin-relay.md, "Trust"). Every instance runs as
 * the daemon's user, so any of them (or any other process of that user) can read another's
 * `CLOUD_WORKLOAD_TOKEN` from /proc. The relay therefore ties each call to the process that made
 * it: the connection's socket is looked up in `/proc/net/tcp` (its inode), and the call is relayed
 * only when a process of the instance's tree (its root process, the one the runner started, and
 * every descendant still attached to it) holds that socket among its file descriptors. A call that
 * carries a workload token must come from the tree of the token's instance; any other call (the
 * event stream opened with a ticket) from the tree of some instance of this node.
 *
 * The first call on a connection pays for the lookup (one read of /proc/net/tcp, then the file
 * descriptors of the instance's processes; lookups at the same moment share those reads); the
 * connection is remembered as that instance's, so a kept-alive connection costs nothing more and
 * can never speak for another instance.
 */
import { readdir, readFile, readlink } from "node:fs/promises";
import type { Socket } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";

/** A process tree bigger than this is not searched further (a fork bomb is no caller). */
export const callerTreeProcessesMax = 1_024;
/** File descriptors read at once while a process is searched. */
const fdReadsInFlightMax = 64;
/**
 * How long a call waits for the root pid of an instance that is being spawned. The launcher learns
 * the pid after the process already runs (a spawner helper passes it over), so a fast process can
 * call the relay before its pid is known; its call waits for it instead of being refused.
 */
export const spawningPidWaitMsDefault = 10_000;
/** How often a waiting call looks at the runner's list again. */
const spawningPidPollMs = 25;

/** An instance the runner has started, and the pid of its root process (null before it spawned). */
export interface RunningInstance {
  instanceId: string;
  pid: number | null;
}

/** Whether a call on a connection may be relayed. */
export type CallerVerdict = { ok: true; instanceId: string } | { ok: false; reason: string };

/** Decides which instance, if any, a relay connection belongs to. */
export interface RelayCallerCheck {
  /** `claimed`: the instance the call's workload token names, or null for a call without one. */
  admits(socket: Socket, claimed: string | null): Promise<CallerVerdict>;
}

/** How the controller reads an Authorization header (`src/http/middleware/authenticate.ts`). */
const BEARER_PATTERN = /^Bearer\s+(\S+)\s*$/i;

/** Which instance a call speaks for, as far as the relay can tell before the controller checks the token. */
export type CallClaim = { ok: true; instanceId: string | null } | { ok: false; reason: string };

/**
 * The instance the call's workload token names (its `iid` claim, read as the controller reads it:
 * `wl.<base64url JSON>.<signature>`), null for a call without a workload token. The signature is the
 * controller's to check; a changed claim fails there. More than one Authorization header is refused:
 * the relay forwards headers as they came, and it must judge the token the controller will see.
 */
export function claimOf(rawHeaders: readonly string[]): CallClaim {
  const values: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) if (rawHeaders[i]!.toLowerCase() === "authorization") values.push(rawHeaders[i + 1]!);
  if (values.length > 1) return { ok: false, reason: "the call carries more than one Authorization header" };
  const token = values.length === 1 ? BEARER_PATTERN.exec(values[0]!)?.[1] : undefined;
  const parts = token?.split(".");
  if (!parts || parts.length !== 3 || parts[0] !== "wl") return { ok: true, instanceId: null };
  try {
    const claims = JSON.parse(Buffer.from(parts[1]!, "base64url").toString("utf8")) as { iid?: unknown };
    return { ok: true, instanceId: typeof claims.iid === "string" ? claims.iid : null };
  } catch {
    // Claims the controller cannot read either: the token names no instance and is refused there.
    return { ok: true, instanceId: null };
  }
}

/** `a.b.c.d:port` as /proc/net/tcp writes it: the address's bytes in host (little-endian) order, then the port, in upper-case hex. */
export function procNetAddress(address: string, port: number): string | null {
  const ipv4 = address.startsWith("::ffff:") ? address.slice(7) : address;
  const parts = ipv4.split(".").map(Number);
  if (parts.length !== 4 || parts.some((p) => !Number.isInteger(p) || p < 0 || p > 255)) return null;
  const hex = (n: number, width: number) => n.toString(16).toUpperCase().padStart(width, "0");
  return `${parts
    .reverse()
    .map((p) => hex(p, 2))
    .join("")}:${hex(port, 4)}`;
}

/**
 * The inode of the socket whose local end is `local` and remote end `remote` in the text of
 * /proc/net/tcp (`sl local remote st tx:rx tr:when retrnsmt uid timeout inode …`), else null.
 * Searched in the text: a busy host lists thousands of sockets, and one line is wanted.
 */
export function inodeIn(table: string, local: string, remote: string): string | null {
  const needle = ` ${local} ${remote} `;
  // The same ends may be listed twice: a closed connection in TIME_WAIT (inode 0) and a new one.
  for (let at = table.indexOf(needle); at >= 0; at = table.indexOf(needle, at + needle.length)) {
    const end = table.indexOf("\n", at);
    const fields = table
      .slice(at, end < 0 ? undefined : end)
      .trim()
      .split(/\s+/);
    // From the local address on, the inode is the ninth field.
    const inode = fields[8];
    if (inode !== undefined && /^[1-9][0-9]*$/.test(inode)) return inode;
  }
  return null;
}

/** Options of {@link ProcessCallerCheck}. */
export interface ProcessCallerCheckOptions {
  /** The instances running now, with their root pids (the runner's list). */
  instances: () => Iterable<RunningInstance>;
  /** Where procfs is mounted. */
  procRoot?: string;
  /** See {@link spawningPidWaitMsDefault}. */
  spawningPidWaitMs?: number;
}

/**
 * Reads of one procfs file shared by the lookups that want them at once (a burst of new connections
 * from one instance costs one read, not one each). A lookup that must see something newer than a
 * moment (a connection accepted before it began) asks for a read started after that moment.
 */
class SharedReads<V> {
  private readonly inflight = new Map<string, { startedAt: number; result: Promise<V> }>();
  private ticks = 0;

  /** The current moment, to pass as `startedAfter` later. */
  now(): number {
    return ++this.ticks;
  }

  read(key: string, startedAfter: number, run: () => Promise<V>): Promise<V> {
    const current = this.inflight.get(key);
    if (current && current.startedAt > startedAfter) return current.result;
    const startedAt = ++this.ticks;
    const result = run().finally(() => {
      if (this.inflight.get(key)?.startedAt === startedAt) this.inflight.delete(key);
    });
    this.inflight.set(key, { startedAt, result });
    return result;
  }
}

/** The peer-process check over procfs; see the module comment. */
export class ProcessCallerCheck implements RelayCallerCheck {
  private readonly owners = new WeakMap<Socket, string>();
  private readonly proc: string;
  private readonly tcpTables = new SharedReads<string>();
  private readonly socketSets = new SharedReads<Set<string>>();

  constructor(private readonly options: ProcessCallerCheckOptions) {
    this.proc = options.procRoot ?? "/proc";
  }

  /**
   * Whether this machine lets the daemon do the lookup: /proc/net/tcp readable, and the children
   * of a process listed under /proc/<pid>/task/<tid>/children (Linux with CONFIG_PROC_CHILDREN).
   */
  static async supported(procRoot = "/proc"): Promise<boolean> {
    try {
      await readFile(`${procRoot}/net/tcp`, "utf8");
      await readFile(`${procRoot}/${process.pid}/task/${process.pid}/children`, "utf8");
      return true;
    } catch {
      return false;
    }
  }

  async admits(socket: Socket, claimed: string | null): Promise<CallerVerdict> {
    const known = this.owners.get(socket);
    if (known !== undefined) {
      if (claimed === null || claimed === known) return { ok: true, instanceId: known };
      return { ok: false, reason: `this connection belongs to instance ${known}, not ${claimed}` };
    }
    const candidatesNow = () => {
      const running = [...this.options.instances()];
      return claimed === null ? running : running.filter((instance) => instance.instanceId === claimed);
    };
    const deadline = Date.now() + (this.options.spawningPidWaitMs ?? spawningPidWaitMsDefault);
    let candidates = candidatesNow();
    if (claimed !== null) {
      // An instance being spawned may call before its pid is known (see spawningPidWaitMsDefault).
      while (candidates.length > 0 && candidates.every((instance) => instance.pid === null) && Date.now() < deadline) {
        await sleep(spawningPidPollMs);
        candidates = candidatesNow();
      }
      if (candidates.every((instance) => instance.pid === null)) return { ok: false, reason: `instance ${claimed} has no process on this node` };
    }
    // Every read started from here on sees the connection (it was accepted before this call).
    const begun = { tcp: this.tcpTables.now(), sockets: this.socketSets.now() };
    const inode = await this.socketInode(socket, begun.tcp);
    if (inode === null) return { ok: false, reason: "the connection's socket was not found in /proc/net/tcp" };
    const searched = new Set<number>();
    for (;;) {
      for (const instance of candidates) {
        if (instance.pid === null || searched.has(instance.pid)) continue;
        searched.add(instance.pid);
        if (await this.treeHolds(instance.pid, inode, begun.sockets)) {
          this.owners.set(socket, instance.instanceId);
          return { ok: true, instanceId: instance.instanceId };
        }
      }
      // A caller without a workload token may be an instance whose pid is not known yet.
      if (!candidates.some((instance) => instance.pid === null) || Date.now() >= deadline) break;
      await sleep(spawningPidPollMs);
      candidates = candidatesNow();
    }
    const whose = claimed === null ? "an instance on this node" : `instance ${claimed}`;
    return { ok: false, reason: `this connection does not come from a process of ${whose}` };
  }

  /** The inode of the caller's end of the connection (local = the caller, remote = the relay). */
  private async socketInode(socket: Socket, begun: number): Promise<string | null> {
    const caller = socket.remoteAddress && socket.remotePort ? procNetAddress(socket.remoteAddress, socket.remotePort) : null;
    const relay = socket.localAddress && socket.localPort ? procNetAddress(socket.localAddress, socket.localPort) : null;
    if (caller === null || relay === null) return null;
    // A read already under way usually has it; one started after this lookup began surely does.
    const shared = await this.tcpTables.read("tcp", 0, () => this.readTcpTable());
    return inodeIn(shared, caller, relay) ?? inodeIn(await this.tcpTables.read("tcp", begun, () => this.readTcpTable()), caller, relay);
  }

  private async readTcpTable(): Promise<string> {
    try {
      return await readFile(`${this.proc}/net/tcp`, "utf8");
    } catch {
      return "";
    }
  }

  /** Whether a process of the tree under `root` holds the socket `inode`. */
  private async treeHolds(root: number, inode: string, begun: number): Promise<boolean> {
    const target = `socket:[${inode}]`;
    const queue = [root];
    const seen = new Set<number>();
    while (queue.length > 0 && seen.size < callerTreeProcessesMax) {
      const pid = queue.shift()!;
      if (seen.has(pid)) continue;
      seen.add(pid);
      const key = String(pid);
      if ((await this.socketSets.read(key, 0, () => this.socketsOf(pid))).has(target)) return true;
      if ((await this.socketSets.read(key, begun, () => this.socketsOf(pid))).has(target)) return true;
      queue.push(...(await this.childrenOf(pid)));
    }
    return false;
  }

  /** The sockets (`socket:[<inode>]`) among the process's file descriptors. */
  private async socketsOf(pid: number): Promise<Set<string>> {
    const sockets = new Set<string>();
    let fds: string[];
    try {
      fds = await readdir(`${this.proc}/${pid}/fd`);
    } catch {
      // Gone, or not ours to inspect: it holds nothing we can see.
      return sockets;
    }
    for (let from = 0; from < fds.length; from += fdReadsInFlightMax) {
      const links = await Promise.all(fds.slice(from, from + fdReadsInFlightMax).map((fd) => readlink(`${this.proc}/${pid}/fd/${fd}`).catch(() => "")));
      for (const link of links) if (link.startsWith("socket:[")) sockets.add(link);
    }
    return sockets;
  }

  private async childrenOf(pid: number): Promise<number[]> {
    let tasks: string[];
    try {
      tasks = await readdir(`${this.proc}/${pid}/task`);
    } catch {
      return [];
    }
    const lists = await Promise.all(tasks.map((tid) => readFile(`${this.proc}/${pid}/task/${tid}/children`, "utf8").catch(() => "")));
    return lists.flatMap((list) =>
      list
        .split(" ")
        .filter((word) => /^[1-9][0-9]*$/.test(word))
        .map(Number),
    );
  }
}

/** `pluginRelay.callerCheck` of daemon.yml. */
export type CallerCheckMode = "auto" | "process" | "off";

/**
 * The check the relay uses: the process check, unless `mode` is `off`, or `auto` on a machine
 * without the procfs it needs (then `warn` says so). `process` on such a machine is an error.
 */
export async function callerCheckFor(
  mode: CallerCheckMode,
  instances: () => Iterable<RunningInstance>,
  warn: (message: string) => void,
): Promise<RelayCallerCheck | null> {
  if (mode === "off") return null;
  if (await ProcessCallerCheck.supported()) return new ProcessCallerCheck({ instances });
  if (mode === "process") {
    throw new Error("pluginRelay.callerCheck is process, but /proc/net/tcp or /proc/<pid>/task/<tid>/children cannot be read on this machine");
  }
  warn(
    "The plugin relay cannot tell which process calls it here (no /proc/net/tcp or /proc/<pid>/task/<tid>/children): any local process may use any instance's token through it",
  );
  return null;
}

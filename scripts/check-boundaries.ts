// The house rules CI checks (ARCHITECTURE.md, "Rules of the house"; docs/decisions/boundaries.md):
// 1. No file in src/ over 500 lines (raft/raft.ts, outside src/, is the one exempt file).
// 2. The rooms of src/ sit on the floors of one table (ROOMS below): a room imports only rooms on a lower
//    floor, never one above it or beside it, and a separate program imports only the rooms it lists.
//    A room split into sub-rooms (SUB_FLOORS) keeps a table of its own: a sub-room imports only sub-rooms below it.
// 3. No raw timer or clock read (setTimeout, setInterval, setImmediate, Date.now, performance.now) in
//    controller-side rooms: time goes through the injected Clock of src/shared/clock.ts.
// 4. raft/ and actors/ import nothing from src/; raft/ stays pure (no I/O, timers, clock or randomness).
// 5. No import cycles in src/ or actors/ (type-only imports count).
// 6. process.argv is read only by a program's entry (a main.ts) and by cloudctl (src/cli/): the others take options.
// `checkBoundaries(root)` runs them all on a tree (test/scripts/check-boundaries.test.ts runs it on
// fixture trees); run as a script it checks the repository, or the directory given as its argument.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { basename, join, relative, resolve } from "node:path";
import { pathToFileURL } from "node:url";

/** The line limit of a file in src/. */
export const maxFileLines = 500;

/**
 * The floors of src/, lowest first: a room imports only rooms on lower floors. Derived from the import
 * graph; a room that needs one beside or above it moves the shared type down (as DaemonReport moved to
 * wire/) or is listed in IMPORT_EXCEPTIONS with the reason.
 */
export const FLOORS: readonly (readonly string[])[] = [
  /* 0 */ ["shared", "config", "sdk"],
  /* 1 */ ["store", "logs", "wire"],
  /* 2 */ ["metrics", "audit", "diagnostics"],
  /* 3 */ ["events", "share"],
  /* 4 */ ["domain"],
  /* 5 */ ["cluster", "coordination", "templates"],
  /* 6 */ ["scheduler", "gateway", "auth", "backup", "modules", "catalog"],
  /* 7 */ ["plugin-api", "deployments"],
  /* 8 */ ["http"],
  /* 9 */ ["controller"],
];

/**
 * Rooms split into sub-rooms, each with a table of floors of its own, lowest first: a file of a
 * sub-room imports only sub-rooms on lower floors of its room (and its own sub-room). "." is the
 * room's own top-level files, its face to the other rooms. A folder of the room on no floor fails.
 */
export const SUB_FLOORS: Readonly<Record<string, readonly (readonly string[])[]>> = {
  cluster: [/* 0 */ ["raft-host", "identity"], /* 1 */ ["state"], /* 2 */ ["peers"], /* 3 */ ["membership"], /* 4 */ ["."]],
};

/** A room with rules of its own beyond its floor. */
export interface RoomRule {
  /** Imports only these rooms (and its own files); no floor applies. */
  only?: readonly string[];
  /** Must not import these rooms, although they are lower. */
  never?: readonly string[];
  /** Runs outside the controller (a process, isolate or browser of its own): raw timers are allowed; off the floors, no room imports it. */
  program?: boolean;
  why: string;
}

/** Rooms (and sub-rooms, which win over their room) with rules of their own. */
export const ROOM_RULES: Readonly<Record<string, RoomRule>> = {
  daemon: {
    only: ["wire", "shared", "config", "logs", "sdk"],
    program: true,
    why: "the node daemon is a separate process: only the wire contract, the rooms both processes share and the plugin SDK",
  },
  "daemon/simulated-server": {
    only: ["sdk"],
    program: true,
    why: "the simulated game server is bundled with the SDK into one file: what it imports is what the bundle's cache key hashes",
  },
  sdk: { only: [], program: true, why: "the plugin and module SDK is published on its own (package subpath ./sdk)" },
  cli: {
    only: ["shared", "wire", "config", "modules/manifest"],
    program: true,
    why: "cloudctl talks to the controller over HTTP; `module doctor` checks a manifest with the controller's own rules",
  },
  dashboard: { only: [], program: true, why: "the dashboard runs in the browser: it talks to the controller over HTTP only" },
  modules: {
    only: ["shared", "store", "templates", "events", "logs", "sdk", "wire", "metrics", "config"],
    why: "platform modules build on the stores' ports, the templates' archive readers and the event types; the composition root wires them and http/ mounts them",
  },
  "modules/manifest": {
    only: [],
    why: "the manifest rules are pure (yaml and semver only), so cloudctl's `module doctor` can run them on the operator's machine",
  },
  "modules/worker": {
    only: ["sdk"],
    program: true,
    why: "a module's worker thread is an isolate of its own: it loads only the module SDK and the worker's own files",
  },
  http: { never: ["store"], why: "routes call services, never stores directly" },
};

/** Imports the table refuses but today's tree still has, each with the reason it stays. Keep it short. */
export const IMPORT_EXCEPTIONS: readonly { file: string; room: string; why: string }[] = [
  {
    file: "src/http/app.ts",
    room: "store",
    why: "HttpDeps carries the kv store for the login throttle (and a documents field); it goes when the composition root builds the throttle",
  },
];

/** The one file of a controller-side room that may touch the system timers and clock. */
export const CLOCK_FILE = "src/shared/clock.ts";

/**
 * Controller-side files that still call a raw timer, each with the reason (the call needs a redesign to go
 * through the Clock). Keep it short; a new one is a review question, not a formality.
 */
export const TIMER_EXCEPTIONS: Readonly<Record<string, string>> = {
  // Bounds on real processes and sockets: they must fire in wall time even while a test holds the
  // injected clock still, or a stuck child, socket, event handler or grpc-js shutdown would hang the process.
  "src/controller/lifecycle.ts": "the stop's wall-time bound on event handlers, and the stopwatch of slow cleanups",
  "src/controller/http-server.ts": "closing the HTTP connections still open after the drain bound",
  "src/controller/shutdown.ts": "the forced-exit watchdog of the controller process",
  "src/controller/local-daemon.ts": "SIGKILL after the local daemon child ignores SIGTERM",
  "src/cluster/membership/recovery.ts": "TCP probe timeout of a peer's Raft port",
  "src/cluster/raft-host/grpc-transport.ts": "socket-level hold, reconnect and forced close of the Raft transport",
  "src/gateway/daemon-gateway.ts": "the grace bound of grpc-js's server shutdown",
  // Renewal against an expiry the leader's (injected) clock decides: on that clock a test's advance would
  // renew the lease it means to expire; it goes when the renewal runs on the Raft host's clock.
  "src/cluster/state/singleton-leases.ts": "lease renewal paced by Raft, not by the stamping clock",
};

// A call, not a method declared in a type (`setTimeout(callback: () => void, ...)`).
const rawTimer = /(?<![\w.$])(setTimeout|setInterval|setImmediate)\s*\((?!\s*[\w$]+\??\s*:)|\b(Date\.now|performance\.now)\s*\(/;
const argvRead = /\bprocess\.argv\b/;
const ownSleep = /\b(?:function|const|let)\s+sleep\b/;
const importPattern = /(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g;
const impureModules = new Set([
  "fs",
  "fs/promises",
  "net",
  "dgram",
  "timers",
  "timers/promises",
  "child_process",
  "http",
  "https",
  "http2",
  "worker_threads",
  "crypto",
  "os",
]);
const impureCalls = /\b(Date\.now|Math\.random|setTimeout|setInterval|setImmediate|performance\.now)\s*\(/;

function files(dir: string): string[] {
  const out: string[] = [];
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return out;
  }
  for (const name of names.sort()) {
    const full = join(dir, name);
    if (statSync(full).isDirectory()) out.push(...files(full));
    else if (name.endsWith(".ts") || name.endsWith(".tsx")) out.push(full);
  }
  return out;
}

const isComment = (line: string) => {
  const trimmed = line.trim();
  return trimmed.startsWith("//") || trimmed.startsWith("*") || trimmed.startsWith("/*");
};

/** The room (or sub-room with rules of its own) of a path relative to src/. */
function roomOf(pathInSrc: string): string {
  const parts = pathInSrc.split("/");
  const sub = parts.slice(0, 2).join("/");
  return ROOM_RULES[sub] && parts.length > 2 ? sub : parts[0]!;
}
const floorOf = (room: string) => FLOORS.findIndex((floor) => floor.includes(room.split("/")[0]!));
/** The sub-room of a path relative to src/ in a room of SUB_FLOORS ("." for the room's own files), or null. */
const subRoomOf = (pathInSrc: string): { room: string; sub: string } | null => {
  const parts = pathInSrc.split("/");
  return SUB_FLOORS[parts[0]!] ? { room: parts[0]!, sub: parts.length > 2 ? parts[1]! : "." } : null;
};
const subFloorOf = (room: string, sub: string) => SUB_FLOORS[room]!.findIndex((floor) => floor.includes(sub));
const within = (room: string, other: string) => room === other || room.startsWith(other + "/");

/** Runs every rule on the tree at `root`; returns the problems, one line each (empty when the tree is clean). */
export function checkBoundaries(root: string): string[] {
  const problems: string[] = [];
  const src = join(root, "src");
  const srcFiles = files(src);

  // 1. File size.
  for (const file of srcFiles) {
    const lines = readFileSync(file, "utf8").split("\n");
    const count = lines.at(-1) === "" ? lines.length - 1 : lines.length;
    if (count > maxFileLines) problems.push(`${relative(root, file)}: ${count} lines; a file in src/ has at most ${maxFileLines}`);
  }

  // 2. Floors. Every top-level room must be on a floor or be a program.
  for (const name of readdirSync(src, { withFileTypes: true })) {
    if (!name.isDirectory()) continue;
    if (floorOf(name.name) < 0 && !ROOM_RULES[name.name]?.program)
      problems.push(`src/${name.name}/: a room on no floor; add it to the table in scripts/check-boundaries.ts`);
  }
  for (const room of Object.keys(SUB_FLOORS)) {
    const dir = join(src, room);
    if (!existsSync(dir)) continue; // the room is not in this tree
    const names = readdirSync(dir, { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => entry.name);
    for (const name of names.sort())
      if (subFloorOf(room, name) < 0)
        problems.push(`src/${room}/${name}/: a sub-room on no floor of ${room}/; add it to SUB_FLOORS in scripts/check-boundaries.ts`);
  }
  for (const file of srcFiles) {
    const rel = relative(root, file);
    const from = roomOf(relative(src, file));
    const rule = ROOM_RULES[from];
    for (const m of readFileSync(file, "utf8").matchAll(importPattern)) {
      const spec = m[1] ?? m[2] ?? "";
      if (!spec.startsWith(".")) continue;
      const target = relative(src, join(file, "..", spec));
      if (target.startsWith("..")) continue; // outside src/: raft/ and actors/ have rules of their own
      const to = roomOf(target);
      const fromSub = subRoomOf(relative(src, file));
      const toSub = subRoomOf(target);
      if (fromSub && toSub && fromSub.room === toSub.room && fromSub.sub !== toSub.sub) {
        const fromSubFloor = subFloorOf(fromSub.room, fromSub.sub);
        const toSubFloor = subFloorOf(toSub.room, toSub.sub);
        const name = (sub: string) => (sub === "." ? `${toSub.room}/` : `${toSub.room}/${sub}/`);
        if (fromSubFloor < 0 || toSubFloor < 0) continue; // a sub-room on no floor is reported once, above
        if (toSubFloor > fromSubFloor)
          problems.push(
            `${rel}: imports ${spec}; ${name(toSub.sub)} (floor ${toSubFloor} of ${toSub.room}/) is above ${name(fromSub.sub)} (floor ${fromSubFloor})`,
          );
        else if (toSubFloor === fromSubFloor)
          problems.push(`${rel}: imports ${spec}; ${name(toSub.sub)} is beside ${name(fromSub.sub)} (both on floor ${fromSubFloor} of ${toSub.room}/)`);
        continue;
      }
      // A room may import its own sub-rooms; a sub-room (the worker, the simulated server) keeps to its own list.
      if (within(to, from)) continue;
      if (IMPORT_EXCEPTIONS.some((e) => e.file === rel && within(to, e.room))) continue;
      if (rule?.only) {
        if (!rule.only.some((r) => within(to, r)))
          problems.push(`${rel}: imports ${spec}; ${from}/ imports only ${rule.only.map((r) => r + "/").join(", ") || "its own files"} (${rule.why})`);
        continue;
      }
      if (ROOM_RULES[to]?.program && floorOf(to) < 0) {
        problems.push(`${rel}: imports ${spec}; ${to}/ is a program of its own, no room imports it`);
        continue;
      }
      if (rule?.never?.some((r) => within(to, r))) {
        problems.push(`${rel}: imports ${spec}; ${from}/ must not import ${to}/ (${rule.why})`);
        continue;
      }
      const fromFloor = floorOf(from);
      const toFloor = floorOf(to);
      if (fromFloor < 0) continue; // a room on no floor is reported once, above
      if (toFloor > fromFloor) problems.push(`${rel}: imports ${spec}; ${to}/ (floor ${toFloor}) is above ${from}/ (floor ${fromFloor})`);
      else if (toFloor === fromFloor) problems.push(`${rel}: imports ${spec}; ${to}/ is beside ${from}/ (both on floor ${fromFloor})`);
    }
  }

  // 3. Raw timers in controller-side rooms.
  for (const file of srcFiles) {
    const rel = relative(root, file);
    if (rel === CLOCK_FILE || ROOM_RULES[roomOf(relative(src, file))]?.program || TIMER_EXCEPTIONS[rel] !== undefined) continue;
    readFileSync(file, "utf8")
      .split("\n")
      .forEach((line, i) => {
        const call = rawTimer.exec(line);
        if (call && !isComment(line))
          problems.push(`${rel}:${i + 1}: raw ${call[1] ?? call[2]}() in a controller room; use the injected Clock (src/shared/clock.ts)`);
        if (ownSleep.test(line) && !isComment(line)) problems.push(`${rel}:${i + 1}: a sleep of its own; use sleep(clock, ms) of src/shared/clock.ts`);
      });
  }

  // 4. raft/ and actors/.
  for (const area of ["raft", "actors"]) {
    for (const file of files(join(root, area))) {
      const text = readFileSync(file, "utf8");
      const rel = relative(root, file);
      for (const m of text.matchAll(importPattern)) {
        const spec = m[1] ?? m[2] ?? "";
        if (spec.startsWith(".")) {
          const target = relative(root, join(file, "..", spec));
          if (!target.startsWith(area + "/")) problems.push(`${rel}: imports ${spec} from outside ${area}/`);
        }
        const bare = spec.replace(/^node:/, "");
        if (area === "raft" && (impureModules.has(bare) || spec.startsWith("node:"))) problems.push(`${rel}: raft/ must not import ${spec}`);
        if (area === "actors" && impureModules.has(bare)) problems.push(`${rel}: actors/ must not import I/O module ${spec}`);
      }
      if (area === "raft") {
        text.split("\n").forEach((line, i) => {
          if (impureCalls.test(line) && !isComment(line)) problems.push(`${rel}:${i + 1}: raft/ must not use time or randomness: ${line.trim()}`);
        });
      }
    }
  }

  // 5. Import cycles: the strongly connected components (Tarjan) of the static relative imports.
  const staticImport = /(?:import|export)\s+(?:type\s+)?(?:[^'"]*?\sfrom\s+)?['"](\.{1,2}\/[^'"]+)['"]/g;
  const graph = new Map<string, string[]>();
  for (const area of ["src", "actors"]) for (const file of files(join(root, area))) graph.set(file, []);
  for (const [file, targets] of graph) {
    for (const m of readFileSync(file, "utf8").matchAll(staticImport)) {
      const base = join(file, "..", m[1]!).replace(/\.js$/, "");
      const target = [`${base}.ts`, `${base}.tsx`].find((candidate) => graph.has(candidate));
      if (target) targets.push(target);
    }
  }
  const order = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const visit = (file: string): void => {
    order.set(file, order.size);
    low.set(file, order.get(file)!);
    stack.push(file);
    onStack.add(file);
    for (const target of graph.get(file)!) {
      if (!order.has(target)) {
        visit(target);
        low.set(file, Math.min(low.get(file)!, low.get(target)!));
      } else if (onStack.has(target)) {
        low.set(file, Math.min(low.get(file)!, order.get(target)!));
      }
    }
    if (low.get(file) !== order.get(file)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(relative(root, member));
    } while (member !== file);
    if (component.length > 1) problems.push(`import cycle: ${component.sort().join(" <-> ")}`);
  };
  for (const file of graph.keys()) if (!order.has(file)) visit(file);

  // 6. process.argv: the entries parse the command line and pass what the rooms need as options.
  for (const file of srcFiles) {
    const rel = relative(root, file);
    if (basename(file) === "main.ts" || within(roomOf(relative(src, file)), "cli")) continue;
    readFileSync(file, "utf8")
      .split("\n")
      .forEach((line, i) => {
        if (argvRead.test(line) && !isComment(line))
          problems.push(`${rel}:${i + 1}: reads process.argv; only a program's main.ts and src/cli/ read the command line, the others take an option`);
      });
  }

  return problems;
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  const root = resolve(process.argv[2] ?? join(import.meta.dirname, ".."));
  const problems = checkBoundaries(root);
  if (problems.length > 0) {
    console.error(problems.join("\n"));
    process.exit(1);
  }
  console.log("house rules ok: file sizes, floors and sub-floors, clock, process.argv, raft/ and actors/, no cycles");
}

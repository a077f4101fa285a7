// Import-boundary check: dependencies point inward (ARCHITECTURE.md, "Rules of the house").
// raft/ and actors/ import nothing from src/; raft/ stays pure (no I/O, timers, clock or randomness).
// The daemon is a separate process: it imports no controller room, only the wire contract, the
// rooms both processes share and the plugin SDK (which imports nothing else from src/), and those
// import no controller room either. modules/ sits below http/ and the composition root; a module's
// worker thread imports only the module SDK. auth/ owns the principal
// and plugin-api/ builds on auth/: neither imports http/, the room above them. No import cycles in
// src/ or actors/ (type-only imports count; raft/'s role files are the one allowed exception).
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";

const root = join(import.meta.dirname, "..");
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
  for (const name of names) {
    const full = join(dir, name);
    if (statSync(full).isDirectory()) out.push(...files(full));
    else if (name.endsWith(".ts") || name.endsWith(".tsx")) out.push(full);
  }
  return out;
}

const problems: string[] = [];
for (const area of ["raft", "actors"]) {
  for (const file of files(join(root, area))) {
    const text = readFileSync(file, "utf8");
    const rel = relative(root, file);
    for (const m of text.matchAll(importPattern)) {
      const spec = m[1] ?? m[2] ?? "";
      if (spec.startsWith(".")) {
        const target = relative(root, join(file, "..", spec));
        if (!target.startsWith(area + "/")) {
          problems.push(`${rel}: imports ${spec} from outside ${area}/`);
        }
      }
      const bare = spec.replace(/^node:/, "");
      if (area === "raft" && (impureModules.has(bare) || spec.startsWith("node:"))) problems.push(`${rel}: raft/ must not import ${spec}`);
      if (area === "actors" && impureModules.has(bare)) problems.push(`${rel}: actors/ must not import I/O module ${spec}`);
    }
    if (area === "raft") {
      text.split("\n").forEach((line, i) => {
        if (impureCalls.test(line) && !line.trim().startsWith("//") && !line.trim().startsWith("*"))
          problems.push(`${rel}:${i + 1}: raft/ must not use time or randomness: ${line.trim()}`);
      });
    }
  }
}
/** Rooms under src/ that may import only the listed rooms (and their own). */
const allowedRooms: Record<string, readonly string[]> = {
  "src/daemon": ["src/wire", "src/shared", "src/config", "src/logs", "src/sdk"],
  // The simulated game server is bundled with the SDK into one file: what it imports is what the bundle's cache key hashes.
  "src/daemon/simulated-server": ["src/sdk"],
  // The plugin SDK is published on its own (package subpath ./sdk): it imports nothing else from src/.
  "src/sdk": [],
  // Platform modules: the manifest, bundles, the worker host, storage, capabilities and the registry
  // client build on the stores' ports, the templates' archive readers and the event types; they are
  // wired by the composition root and mounted by http/, never the other way round.
  "src/modules": ["src/shared", "src/store", "src/templates", "src/events", "src/logs", "src/sdk", "src/wire", "src/metrics", "src/config"],
  // A module's worker thread loads only the module SDK and the worker's own files: each worker is an isolate of its own.
  "src/modules/worker": ["src/sdk"],
  "src/wire": ["src/shared"],
  "src/config": ["src/shared"],
  "src/logs": ["src/shared"],
  "src/shared": [],
  // The dashboard runs in the browser: it talks to the controller over HTTP only.
  "src/dashboard": [],
};
/** Rooms under src/ that must not import the listed rooms. */
const forbiddenRooms: Record<string, readonly string[]> = {
  "src/auth": ["src/http"],
  "src/plugin-api": ["src/http"],
  "src/modules": ["src/http", "src/controller", "src/cluster", "src/scheduler", "src/gateway"],
};
const within = (path: string, room: string) => path === room || path.startsWith(room + "/");

for (const [room, allowed] of Object.entries(allowedRooms)) {
  for (const file of files(join(root, room))) {
    const rel = relative(root, file);
    for (const m of readFileSync(file, "utf8").matchAll(importPattern)) {
      const spec = m[1] ?? m[2] ?? "";
      if (!spec.startsWith(".")) continue;
      const target = relative(root, join(file, "..", spec));
      if (within(target, room) || allowed.some((other) => within(target, other))) continue;
      const rooms = allowed.length > 0 ? `${allowed.map((r) => r.slice(4) + "/").join(", ")} and ${room.slice(4)}/` : `${room.slice(4)}/`;
      problems.push(`${rel}: imports ${spec}; ${room.slice(4)}/ imports only ${rooms}`);
    }
  }
}
for (const [room, forbidden] of Object.entries(forbiddenRooms)) {
  for (const file of files(join(root, room))) {
    const rel = relative(root, file);
    for (const m of readFileSync(file, "utf8").matchAll(importPattern)) {
      const spec = m[1] ?? m[2] ?? "";
      if (!spec.startsWith(".")) continue;
      const target = relative(root, join(file, "..", spec));
      const above = forbidden.find((other) => within(target, other));
      if (above) problems.push(`${rel}: imports ${spec}; ${room.slice(4)}/ must not import ${above.slice(4)}/`);
    }
  }
}

// Import cycles: the strongly connected components (Tarjan) of the static relative imports.
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
function visit(file: string): void {
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
}
for (const file of graph.keys()) if (!order.has(file)) visit(file);

if (problems.length > 0) {
  console.error(problems.join("\n"));
  process.exit(1);
}
console.log("import boundaries ok");

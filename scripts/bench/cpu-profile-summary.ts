// Summary of a V8 `.cpuprofile` (from `node --cpu-prof` or the benchmarks' --*-cpu-prof options):
// the sampled time by function (self time, and total time including callees) and by file, and the
// longest stretch without an idle sample (what held the event loop). Wall time in a blocking native
// call (a spawn, a synchronous write) counts as the caller's self time.
//
//   npx tsx scripts/bench/cpu-profile-summary.ts <file.cpuprofile> [--top 25] [--match <text>] [--callers <text>]
//
// --match keeps only the functions whose name or file contains <text> in the total-time list.
// --callers adds a list of who calls the frames matching <text>: the time of every sample under
// such a frame, by the chain of the nearest three project frames (src/, raft/, actors/) above it.
// --window <from>-<to> keeps only the samples taken between two readings of the monotonic clock in
// microseconds (`process.hrtime.bigint() / 1000n` in any process of the machine: V8 stamps samples
// with the same clock); rest-writes.ts prints the window of its measured writes.
import { readFileSync } from "node:fs";
import { relative } from "node:path";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

const file = process.argv[2];
if (!file) throw new Error("usage: cpu-profile-summary.ts <file.cpuprofile> [--top 25] [--match <text>]");
const topAt = process.argv.indexOf("--top");
const top = topAt >= 0 ? Number(process.argv[topAt + 1]) : 25;
const matchAt = process.argv.indexOf("--match");
const match = matchAt >= 0 ? process.argv[matchAt + 1] : undefined;
const callersAt = process.argv.indexOf("--callers");
const callersOf = callersAt >= 0 ? process.argv[callersAt + 1] : undefined;

const profile = JSON.parse(readFileSync(file, "utf8")) as Profile;
const windowAt = process.argv.indexOf("--window");
if (windowAt >= 0) {
  const [fromUs, toUs] = (process.argv[windowAt + 1] ?? "").split("-").map(Number);
  if (!Number.isFinite(fromUs) || !Number.isFinite(toUs)) throw new Error("--window needs <fromUs>-<toUs>");
  const samples: number[] = [];
  const timeDeltas: number[] = [];
  let atUs = profile.startTime;
  let keptAtUs = fromUs;
  for (let i = 0; i < profile.samples.length; i++) {
    atUs += profile.timeDeltas[i] ?? 0;
    if (atUs < fromUs || atUs > toUs) continue;
    samples.push(profile.samples[i]!);
    timeDeltas.push(atUs - keptAtUs);
    keptAtUs = atUs;
  }
  Object.assign(profile, { samples, timeDeltas, startTime: fromUs, endTime: toUs });
}
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parentOf = new Map<number, number>();
for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);

const root = process.cwd();
const fileName = (url: string) => (url ? relative(root, url.replace(/^file:\/\//, "")) : "(native)");
const label = (node: ProfileNode) => `${node.callFrame.functionName || "(anonymous)"} ${fileName(node.callFrame.url)}:${node.callFrame.lineNumber + 1}`;

const selfMs = new Map<string, number>();
const totalMs = new Map<string, number>();
const fileMs = new Map<string, number>();
/** Self time by room (src/<room>, raft, actors, scripts), package (node_modules/<name>) or Node module. */
const roomMs = new Map<string, number>();
const roomOf = (name: string): string => {
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(name);
  if (pkg) return pkg[1]!;
  const room = /^(?:src\/([^/]+)|(raft|actors|scripts|test)\/)/.exec(name);
  if (room) return room[1] ? `src/${room[1]}` : room[2]!;
  if (name.startsWith("node:")) return name.split("/")[0]!.replace(/^node:internal\/.*/, "node:internal");
  return name;
};
let sampledMs = 0;
for (let i = 0; i < profile.samples.length; i++) {
  const ms = (profile.timeDeltas[i + 1] ?? 0) / 1000;
  const leaf = byId.get(profile.samples[i]!)!;
  sampledMs += ms;
  selfMs.set(label(leaf), (selfMs.get(label(leaf)) ?? 0) + ms);
  const leafFile = ["(idle)", "(program)", "(garbage collector)"].includes(leaf.callFrame.functionName)
    ? leaf.callFrame.functionName
    : fileName(leaf.callFrame.url);
  fileMs.set(leafFile, (fileMs.get(leafFile) ?? 0) + ms);
  // Native code is charged to the nearest JavaScript caller's room (a LevelDB read to the store).
  let roomNode: ProfileNode | undefined = leaf;
  while (roomNode && roomNode.callFrame.url === "" && !["(idle)", "(program)", "(garbage collector)", "(root)"].includes(roomNode.callFrame.functionName)) {
    const parent = parentOf.get(roomNode.id);
    roomNode = parent === undefined ? undefined : byId.get(parent);
  }
  const room = roomNode ? (roomNode.callFrame.url === "" ? roomNode.callFrame.functionName : roomOf(fileName(roomNode.callFrame.url))) : "(native)";
  roomMs.set(room, (roomMs.get(room) ?? 0) + ms);
  const seen = new Set<string>();
  for (let id: number | undefined = leaf.id; id !== undefined; id = parentOf.get(id)) {
    const name = label(byId.get(id)!);
    if (seen.has(name)) continue;
    seen.add(name);
    totalMs.set(name, (totalMs.get(name) ?? 0) + ms);
  }
}

const print = (title: string, entries: Map<string, number>, filter: (name: string) => boolean = () => true) => {
  console.log(`\n${title}`);
  const rows = [...entries]
    .filter(([name]) => filter(name))
    .sort((a, b) => b[1] - a[1])
    .slice(0, top);
  for (const [name, ms] of rows) console.log(`${(ms / 1000).toFixed(2).padStart(8)} s ${((ms / sampledMs) * 100).toFixed(1).padStart(5)} %  ${name}`);
};

/** The longest stretch of samples without an idle one: a task that held the event loop. */
function longestBusyStretch(): { startMs: number; ms: number; from: number; to: number } {
  let best = { startMs: 0, ms: 0, from: 0, to: 0 };
  let runStart = -1;
  let runMs = 0;
  let atMs = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const ms = (profile.timeDeltas[i + 1] ?? 0) / 1000;
    const idle = byId.get(profile.samples[i]!)!.callFrame.functionName === "(idle)";
    if (idle) {
      runStart = -1;
      runMs = 0;
    } else {
      if (runStart < 0) runStart = i;
      runMs += ms;
      if (runMs > best.ms) best = { startMs: atMs - runMs + ms, ms: runMs, from: runStart, to: i };
    }
    atMs += ms;
  }
  return best;
}

console.log(`${file}: ${(sampledMs / 1000).toFixed(1)} s sampled over ${((profile.endTime - profile.startTime) / 1e6).toFixed(1)} s`);
const busy = longestBusyStretch();
const busyTotals = new Map<string, number>();
for (let i = busy.from; i <= busy.to; i++) {
  const ms = (profile.timeDeltas[i + 1] ?? 0) / 1000;
  const seen = new Set<string>();
  for (let id: number | undefined = profile.samples[i]; id !== undefined; id = parentOf.get(id)) {
    const name = label(byId.get(id)!);
    if (seen.has(name)) continue;
    seen.add(name);
    busyTotals.set(name, (busyTotals.get(name) ?? 0) + ms);
  }
}
print("self time by room or package (native code charged to its JavaScript caller)", roomMs);
print("self time by file", fileMs);
print("self time by function", selfMs);
print("total time by function (with callees)", totalMs, (name) => !match || name.includes(match));
print(
  `longest stretch without an idle sample: ${(busy.ms / 1000).toFixed(2)} s from ${(busy.startMs / 1000).toFixed(1)} s (total time by function in it)`,
  busyTotals,
);

if (callersOf) {
  const projectFrame = (node: ProfileNode) => /\/(src|raft|actors)\//.test(node.callFrame.url) && !node.callFrame.url.includes("node_modules");
  const callers = new Map<string, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    const ms = (profile.timeDeltas[i + 1] ?? 0) / 1000;
    // The outermost frame matching the text, then the project frames above it.
    let outer: number | undefined;
    for (let id: number | undefined = profile.samples[i]; id !== undefined; id = parentOf.get(id)) if (label(byId.get(id)!).includes(callersOf)) outer = id;
    if (outer === undefined) continue;
    const chain: string[] = [];
    for (let id = parentOf.get(outer); id !== undefined && chain.length < 3; id = parentOf.get(id)) {
      const node = byId.get(id)!;
      if (projectFrame(node) && !label(node).includes(callersOf)) chain.push(label(node));
    }
    const key = chain.length > 0 ? chain.join(" < ") : "(no project frame above)";
    callers.set(key, (callers.get(key) ?? 0) + ms);
  }
  print(`callers of ${callersOf} (nearest project frames, innermost first)`, callers);
}

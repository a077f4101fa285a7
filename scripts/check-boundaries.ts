// Import-boundary check: dependencies point inward (ARCHITECTURE.md, "Rules of the house").
// raft/ and actors/ import nothing from src/; raft/ stays pure (no I/O, timers, clock or randomness).
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";

const root = join(import.meta.dirname, "..");
const importPattern = /(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g;
const impureModules = new Set(["fs", "fs/promises", "net", "dgram", "timers", "timers/promises", "child_process", "http", "https", "http2", "worker_threads", "crypto", "os"]);
const impureCalls = /\b(Date\.now|Math\.random|setTimeout|setInterval|setImmediate|performance\.now)\s*\(/;

function files(dir: string): string[] {
  const out: string[] = [];
  let names: string[];
  try { names = readdirSync(dir); } catch { return out; }
  for (const name of names) {
    const full = join(dir, name);
    if (statSync(full).isDirectory()) out.push(...files(full));
    else if (name.endsWith(".ts")) out.push(full);
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
      if (area === "actors" && (impureModules.has(bare))) problems.push(`${rel}: actors/ must not import I/O module ${spec}`);
    }
    if (area === "raft") {
      text.split("\n").forEach((line, i) => {
        if (impureCalls.test(line) && !line.trim().startsWith("//") && !line.trim().startsWith("*")) problems.push(`${rel}:${i + 1}: raft/ must not use time or randomness: ${line.trim()}`);
      });
    }
  }
}
if (problems.length > 0) {
  console.error(problems.join("\n"));
  process.exit(1);
}
console.log("import boundaries ok");

// Runs every test file under test/ (or those named on the command line) with node:test and tsx.
// Node 20 does not expand globs for --test, so the file list is collected here.
import { readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { spawn } from "node:child_process";

const root = join(import.meta.dirname, "..");

function collect(dir: string, out: string[]): string[] {
  for (const name of readdirSync(dir).sort()) {
    const full = join(dir, name);
    if (statSync(full).isDirectory()) collect(full, out);
    else if (name.endsWith(".test.ts")) out.push(relative(root, full));
  }
  return out;
}

const args = process.argv.slice(2);
const files = args.length > 0 ? args : collect(join(root, "test"), []);
if (files.length === 0) {
  console.error("no test files found");
  process.exit(1);
}
const concurrency = process.env.TEST_CONCURRENCY ?? "2";
const child = spawn(process.execPath, ["--import", "tsx", "--test", `--test-concurrency=${concurrency}`, "--test-reporter=spec", ...files], {
  cwd: root,
  stdio: "inherit",
});
child.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));

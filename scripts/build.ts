// `npm run build` (also `prepack`): compiles what ships (src/, raft/, actors/ per tsconfig.build.json)
// into dist/ and puts every file the compiled code reads at run time at the same path relative to
// it as in the source tree: proto/*.proto -> dist/proto/, the plain-JavaScript helpers (*.cjs and any
// other non-TypeScript file under src/, raft/, actors/) next to their compiled neighbours. It also
// records the commit the build was made from in dist/build-info.json (read by the version route, so
// an installed package does not ask git about whatever directory it was installed into). Two more
// outputs: the simulated game server bundled with the plugin SDK into one CommonJS file
// (dist/src/daemon/simulated-server/server.cjs, run by plain node), and the SDK's type declarations
// (dist/src/sdk/**/*.d.ts) for the package subpaths `cloud-control-plane/sdk` and
// `cloud-control-plane/module`. And the dashboard (src/dashboard, built by Vite into dist/dashboard,
// served by the controller under /ui/), which is not compiled by tsc nor copied file by file.
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, relative } from "node:path";
import { bundleSimulatedServerSync } from "../src/daemon/simulated-server/bundle.js";
import { buildDashboard, DASHBOARD_SOURCE_DIR } from "./dashboard.js";

const root = join(import.meta.dirname, "..");
const dist = join(root, "dist");
/** Source areas compiled into dist/ (must match tsconfig.build.json's include). */
const compiledAreas = ["src", "raft", "actors"];
/** Files that are compiled, not copied. */
const compiledFile = /\.(ts|mts|cts)$/;

const started = Date.now();
const step = (message: string) => process.stdout.write(`build: ${message} (${((Date.now() - started) / 1000).toFixed(1)} s)\n`);

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const full = join(dir, name);
    if (statSync(full).isDirectory()) out.push(...filesUnder(full));
    else out.push(full);
  }
  return out;
}

function copyBeside(file: string): void {
  const target = join(dist, relative(root, file));
  mkdirSync(dirname(target), { recursive: true });
  copyFileSync(file, target);
}

/** The commit of the source tree, or "unknown" outside a git work tree. */
function sourceCommit(): string {
  if (process.env.CLOUD_GIT_COMMIT?.trim()) return process.env.CLOUD_GIT_COMMIT.trim();
  try {
    const commit = execFileSync("git", ["rev-parse", "HEAD"], { cwd: root, stdio: ["ignore", "pipe", "ignore"], timeout: 5_000 })
      .toString()
      .trim();
    return /^[0-9a-f]{7,64}$/i.test(commit) ? commit : "unknown";
  } catch {
    return "unknown";
  }
}

rmSync(dist, { recursive: true, force: true });
step("dist/ removed");

const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
const compiled = spawnSync(process.execPath, [tsc, "-p", join(root, "tsconfig.build.json")], { cwd: root, stdio: "inherit" });
if (compiled.status !== 0) {
  process.stderr.write(`build: tsc failed (${compiled.signal ?? `status ${compiled.status}`})\n`);
  process.exit(1);
}
step("compiled with tsc -p tsconfig.build.json");

// Declarations of the SDK only (the rest of the package is run, not built against).
const declared = spawnSync(
  process.execPath,
  [
    tsc,
    join(root, "src", "sdk", "index.ts"),
    join(root, "src", "sdk", "module", "index.ts"),
    ...[
      "--ignoreConfig",
      "--declaration",
      "--emitDeclarationOnly",
      "--outDir",
      dist,
      "--rootDir",
      root,
      "--module",
      "NodeNext",
      "--moduleResolution",
      "NodeNext",
    ],
    ...["--target", "ES2023", "--lib", "ES2023", "--strict", "--skipLibCheck", "--types", "node", "--verbatimModuleSyntax"],
  ],
  { cwd: root, stdio: "inherit" },
);
if (declared.status !== 0) {
  process.stderr.write(`build: tsc (SDK declarations) failed (${declared.signal ?? `status ${declared.status}`})\n`);
  process.exit(1);
}
step("SDK declarations written (dist/src/sdk)");

const simulatedServer = join(dist, "src", "daemon", "simulated-server", "server.cjs");
bundleSimulatedServerSync(simulatedServer);
step(`simulated server bundled with the SDK (${relative(root, simulatedServer)})`);

const protos = readdirSync(join(root, "proto")).filter((name) => name.endsWith(".proto"));
for (const name of protos) copyBeside(join(root, "proto", name));
const assets = compiledAreas
  .flatMap((area) => filesUnder(join(root, area)))
  .filter((file) => !compiledFile.test(file) && !file.startsWith(DASHBOARD_SOURCE_DIR + "/"));
for (const file of assets) copyBeside(file);
step(`copied ${protos.length} protos and ${assets.length} other files: ${assets.map((f) => relative(root, f)).join(", ")}`);

await buildDashboard();
step("dashboard built with Vite (dist/dashboard)");

const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string; bin: Record<string, string> };
writeFileSync(
  join(dist, "build-info.json"),
  `${JSON.stringify({ version: pkg.version, gitCommit: sourceCommit(), builtAt: new Date().toISOString() }, null, 2)}\n`,
);
for (const [name, entry] of Object.entries(pkg.bin)) {
  const path = join(root, entry);
  if (!readFileSync(path, "utf8").startsWith("#!/usr/bin/env node\n")) {
    process.stderr.write(`build: bin ${name} (${entry}) does not start with #!/usr/bin/env node\n`);
    process.exit(1);
  }
  chmodSync(path, 0o755);
}
step(`wrote dist/build-info.json; bins ${Object.keys(pkg.bin).join(", ")} executable`);

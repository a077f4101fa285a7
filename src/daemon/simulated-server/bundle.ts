/**
 * Bundles the simulated server (server.ts with the plugin SDK) into one CommonJS file with esbuild,
 * so it starts with plain `node`: no TypeScript or ES module loader (hundreds start at once).
 * `npm run build` writes it beside the compiled modules; from the source tree it is written once
 * per source version into a cache outside the tree (contract.ts). esbuild is a development
 * dependency: nothing here runs in the built package.
 */
import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = fileURLToPath(new URL(".", import.meta.url));
/** The program's entry. */
export const simulatedServerEntry = join(here, "server.ts");
/** What the bundle may contain from this repository: this directory and the SDK (check:boundaries holds the server to it). */
export const simulatedServerSourceDirs: readonly string[] = [here, resolve(here, "..", "..", "sdk")];
const root = resolve(here, "..", "..", "..");

type Esbuild = typeof import("esbuild");
const loadEsbuild = (): Esbuild => createRequire(import.meta.url)("esbuild") as Esbuild;

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...sourceFiles(full));
    else if (entry.name.endsWith(".ts")) out.push(full);
  }
  return out.sort();
}

/** Hash of every source the bundle can contain and of the esbuild version: the cache key. */
export function simulatedServerSourceHash(): string {
  const hash = createHash("sha256").update(`esbuild ${loadEsbuild().version}\n`);
  for (const file of simulatedServerSourceDirs.flatMap(sourceFiles))
    hash
      .update(`${relative(root, file)}\n`)
      .update(readFileSync(file))
      .update("\n");
  return hash.digest("hex");
}

/**
 * Writes the bundle to `outFile` (synchronously: the daemon's startup and the build call it) and
 * checks that it holds nothing from outside the hashed directories, so the cache key covers it.
 */
export function bundleSimulatedServerSync(outFile: string): void {
  const result = loadEsbuild().buildSync({
    entryPoints: [simulatedServerEntry],
    outfile: outFile,
    bundle: true,
    platform: "node",
    format: "cjs",
    target: "node20",
    metafile: true,
    legalComments: "none",
    logLevel: "silent",
    banner: { js: "// The simulated game server and the plugin SDK, bundled by src/daemon/simulated-server/bundle.ts. Generated: do not edit." },
  });
  const outside = Object.keys(result.metafile.inputs)
    .map((input) => resolve(root, input))
    .filter((input) => !simulatedServerSourceDirs.some((dir) => input.startsWith(dir)));
  if (outside.length > 0) throw new Error(`the simulated server's bundle reaches outside its sources: ${outside.map((f) => relative(root, f)).join(", ")}`);
}

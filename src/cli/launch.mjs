#!/usr/bin/env node
/* global process */
/**
 * The `cloudctl` bin (package.json "bin"), so that `npx cloudctl …` works in the installed package
 * and in a clone after `npm ci`. Installed, it runs the compiled CLI (dist/src/cli/main.js). In the
 * source tree (main.ts beside this file) it runs the sources, bundled with esbuild into
 * node_modules/.cache/cloud-control-plane/ once per source version: a later call only compares the
 * bundled files' sizes and modification times, so it starts as fast as a built CLI. Without esbuild
 * (dependencies installed without the dev ones) tsx runs the sources in this process instead. The
 * CLI always runs in this one process: killing it leaves nothing running.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const sourceEntry = join(here, "main.ts");
const rootDir = join(here, "..", "..");
const cacheDir = join(rootDir, "node_modules", ".cache", "cloud-control-plane");
const manifestPath = join(cacheDir, "cloudctl-bundle.json");
/** A superseded bundle is removed once it is this old (a process started just before may still load it). */
const staleBundleAgeMs = 60_000;

/** The bundle recorded in the manifest when every input still has its recorded size and time. */
function currentBundle() {
  try {
    const manifest = JSON.parse(readFileSync(manifestPath, "utf8"));
    const bundle = join(cacheDir, manifest.bundle);
    if (!existsSync(bundle)) return null;
    for (const [path, [size, mtimeMs]] of Object.entries(manifest.inputs)) {
      const info = statSync(join(rootDir, path));
      if (info.size !== size || info.mtimeMs !== mtimeMs) return null;
    }
    return bundle;
  } catch {
    // No manifest yet, or an input was removed: bundle again.
    return null;
  }
}

/** Bundles the CLI's sources (third-party packages stay imports) and records what went into it. */
async function bundleSources() {
  const esbuild = await import("esbuild");
  mkdirSync(cacheDir, { recursive: true });
  const name = `cloudctl-${Date.now()}-${process.pid}.mjs`;
  const result = esbuild.buildSync({
    absWorkingDir: rootDir,
    entryPoints: [sourceEntry],
    outfile: join(cacheDir, name),
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    packages: "external",
    metafile: true,
    logLevel: "error",
  });
  const inputs = {};
  // Input paths are relative to absWorkingDir, the repository root.
  for (const path of Object.keys(result.metafile.inputs)) {
    const info = statSync(join(rootDir, path));
    inputs[path] = [info.size, info.mtimeMs];
  }
  const partial = `${manifestPath}.${process.pid}.partial`;
  writeFileSync(partial, JSON.stringify({ bundle: name, inputs }));
  renameSync(partial, manifestPath);
  for (const entry of readdirSync(cacheDir)) {
    if (!entry.startsWith("cloudctl-") || !entry.endsWith(".mjs") || entry === name) continue;
    try {
      if (Date.now() - statSync(join(cacheDir, entry)).mtimeMs > staleBundleAgeMs) rmSync(join(cacheDir, entry), { force: true });
    } catch {
      // Removed by another call meanwhile.
    }
  }
  return join(cacheDir, name);
}

if (!existsSync(sourceEntry)) {
  await import(pathToFileURL(join(rootDir, "dist", "src", "cli", "main.js")).href);
} else {
  let bundle = currentBundle();
  if (bundle === null) {
    try {
      bundle = await bundleSources();
    } catch (error) {
      if (error?.code !== "ERR_MODULE_NOT_FOUND") throw error;
    }
  }
  if (bundle !== null) await import(pathToFileURL(bundle).href);
  else {
    const { register } = await import("tsx/esm/api");
    register();
    await import(pathToFileURL(sourceEntry).href);
  }
}

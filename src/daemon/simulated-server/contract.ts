/**
 * Where the simulated game server lives and which environment it reads. The program is TypeScript
 * (`server.ts`, using the plugin SDK) run as one bundled CommonJS file, so it starts without a
 * TypeScript loader: hundreds of them must start within seconds. Decisions:
 * docs/decisions/daemon-runner.md.
 */
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync, utimesSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { bundleSimulatedServerSync, simulatedServerSourceHash } from "./bundle.js";

export { INSTANCE_ENV, SIMULATED_CRASH_ON_BOOT_FILE, SIMULATED_READY_LINE_PREFIX, SIMULATED_SERVER_ENV } from "./environment.js";

/**
 * Where bundles made from the source tree are kept (one per source version): the tree's own
 * node_modules/.cache, like other tools' caches, so nothing of a checkout is left in a shared /tmp.
 */
export const SIMULATED_SERVER_CACHE_DIR = fileURLToPath(new URL("../../../node_modules/.cache/cloud-control-plane/simulated-server", import.meta.url));
/** A cached bundle unused this long is removed when a new one is written. */
const cachedBundleMaxAgeMs = 7 * 24 * 3600 * 1000;

let fromSource: string | null = null;

/**
 * Absolute path of the bundled server. In the built package it is `server.cjs` beside this module
 * (`npm run build` writes it there). From the source tree (tsx) it is bundled on first use into
 * SIMULATED_SERVER_CACHE_DIR under the hash of its sources, and reused while they do not change.
 * Synchronous, once per process: the daemon builds its platform table at startup.
 */
export function simulatedServerScriptPath(): string {
  const self = fileURLToPath(import.meta.url);
  if (!self.endsWith(".ts")) return join(dirname(self), "server.cjs");
  fromSource ??= bundleFromSource();
  return fromSource;
}

function bundleFromSource(): string {
  const out = join(SIMULATED_SERVER_CACHE_DIR, `server-${simulatedServerSourceHash().slice(0, 24)}.cjs`);
  if (existsSync(out)) {
    const now = new Date();
    utimesSync(out, now, now);
    return out;
  }
  mkdirSync(SIMULATED_SERVER_CACHE_DIR, { recursive: true });
  // Another process may bundle the same version at once: each writes its own file, the rename is atomic.
  const partial = `${out}.${process.pid}.partial`;
  bundleSimulatedServerSync(partial);
  renameSync(partial, out);
  for (const name of readdirSync(SIMULATED_SERVER_CACHE_DIR)) {
    const file = join(SIMULATED_SERVER_CACHE_DIR, name);
    try {
      if (Date.now() - statSync(file).mtimeMs > cachedBundleMaxAgeMs) rmSync(file, { force: true });
    } catch {
      // Removed by another process meanwhile.
    }
  }
  return out;
}

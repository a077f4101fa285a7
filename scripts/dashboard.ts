// The dashboard's build (Vite), shared by `npm run build`, `npm run build:ui`, `npm start` (which
// builds it when dist/dashboard is missing or older than its sources), `npm run dev:ui` and the
// browser tests. The source is src/dashboard/ (index.html is the entry); the output,
// dist/dashboard/, is what the controller serves under /ui/ (src/http/routes/dashboard.ts).
// Asset URLs are relative (`base: "./"`), so the built files work under any path prefix.
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import type { InlineConfig } from "vite";

export const ROOT_DIR = join(import.meta.dirname, "..");
/** The dashboard's sources (Vite's root). */
export const DASHBOARD_SOURCE_DIR = join(ROOT_DIR, "src", "dashboard");
/** Where the build goes and the controller reads it from. */
export const DASHBOARD_OUT_DIR = join(ROOT_DIR, "dist", "dashboard");

/** The Vite configuration of the build and of the dev server (no config file: this is it). */
export function dashboardViteConfig(overrides: InlineConfig = {}): InlineConfig {
  return {
    configFile: false,
    root: DASHBOARD_SOURCE_DIR,
    base: "./",
    logLevel: "warn",
    clearScreen: false,
    // Preact's JSX runtime; no plugin needed (Vite's own transform).
    oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
    build: {
      outDir: DASHBOARD_OUT_DIR,
      emptyOutDir: true,
      assetsDir: "assets",
      sourcemap: false,
      target: "es2022",
      // The polyfill would be an extra script; every browser the dashboard supports has modulepreload.
      modulePreload: { polyfill: false },
      reportCompressedSize: false,
      chunkSizeWarningLimit: 400,
    },
    ...overrides,
  };
}

/** Builds the dashboard into `outDir` (dist/dashboard by default). */
export async function buildDashboard(outDir = DASHBOARD_OUT_DIR): Promise<void> {
  const { build } = await import("vite");
  await build(dashboardViteConfig({ build: { ...dashboardViteConfig().build, outDir } }));
}

function newestMtimeMs(dir: string): number {
  let newest = 0;
  for (const name of readdirSync(dir)) {
    const full = join(dir, name);
    const stat = statSync(full);
    newest = Math.max(newest, stat.isDirectory() ? newestMtimeMs(full) : stat.mtimeMs);
  }
  return newest;
}

/** True when dist/dashboard is missing or older than a file under src/dashboard. */
export function dashboardIsStale(): boolean {
  const index = join(DASHBOARD_OUT_DIR, "index.html");
  if (!existsSync(index)) return true;
  if (!existsSync(DASHBOARD_SOURCE_DIR)) return false;
  return newestMtimeMs(DASHBOARD_SOURCE_DIR) > statSync(index).mtimeMs;
}

/**
 * Builds the dashboard when {@link dashboardIsStale}; returns whether it built. Safe to run from
 * several processes at once (parallel tests): each builds into its own directory and moves it in
 * place, and one that finds a fresh build there by then throws its own away.
 */
export async function ensureDashboardBuilt(): Promise<boolean> {
  if (!dashboardIsStale()) return false;
  const scratch = join(dirname(DASHBOARD_OUT_DIR), `.dashboard-${process.pid}-${Date.now()}`);
  mkdirSync(dirname(DASHBOARD_OUT_DIR), { recursive: true });
  try {
    await buildDashboard(scratch);
    if (dashboardIsStale()) {
      rmSync(DASHBOARD_OUT_DIR, { recursive: true, force: true });
      try {
        renameSync(scratch, DASHBOARD_OUT_DIR);
      } catch (err) {
        // Another process moved its build in between: that one is as new as ours.
        if (!existsSync(join(DASHBOARD_OUT_DIR, "index.html"))) throw err;
      }
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  return true;
}

// `npm run build:ui`: build now, stale or not.
if (process.argv[1] && import.meta.filename === process.argv[1]) {
  const started = Date.now();
  await buildDashboard();
  process.stdout.write(`build: dashboard built into ${DASHBOARD_OUT_DIR} (${((Date.now() - started) / 1000).toFixed(1)} s)\n`);
}

/**
 * Resolves the system version record once at startup: `version` from package.json, `gitCommit` from
 * CLOUD_GIT_COMMIT, else the build record of a built package (`dist/build-info.json`, written by
 * `npm run build`), else `git rev-parse HEAD` in the source tree ("unknown" when none works),
 * `runtimeVersion` from the running Node.js.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { VersionInfo } from "./routes/system.js";

/** `git rev-parse` must not hold up startup. */
const GIT_TIMEOUT_MS = 2_000;

/**
 * The build record, two levels above this module: dist/build-info.json for dist/src/http/, and a
 * file that never exists (the repository root's build-info.json) when running from source.
 */
export const defaultBuildInfoPath = fileURLToPath(new URL("../../build-info.json", import.meta.url));

/** The commit recorded at build time; undefined when there is no (readable) build record. */
function builtCommit(path: string): string | undefined {
  try {
    const info = JSON.parse(readFileSync(path, "utf8")) as { gitCommit?: unknown };
    return typeof info.gitCommit === "string" ? info.gitCommit : undefined;
  } catch {
    // Not a built package (running from source) or an unreadable record: git is asked instead.
    return undefined;
  }
}

export function resolveVersionInfo(opts: {
  rootDir: string;
  env?: Readonly<Record<string, string | undefined>>;
  /** Where a build records its commit; default {@link defaultBuildInfoPath}. */
  buildInfoPath?: string;
}): VersionInfo {
  const env = opts.env ?? process.env;
  let version = "unknown";
  try {
    const pkg = JSON.parse(readFileSync(join(opts.rootDir, "package.json"), "utf8")) as { version?: unknown };
    if (typeof pkg.version === "string") version = pkg.version;
  } catch {
    // A broken install still answers the route; "unknown" says what happened.
  }
  let gitCommit = env.CLOUD_GIT_COMMIT?.trim() || "";
  // A built package says which commit it was built from; it never asks git, whose answer would be
  // about whatever repository the package happens to be installed in.
  const built = gitCommit ? undefined : builtCommit(opts.buildInfoPath ?? defaultBuildInfoPath);
  if (built !== undefined) gitCommit = built;
  else if (!gitCommit) {
    try {
      gitCommit = execFileSync("git", ["rev-parse", "HEAD"], { cwd: opts.rootDir, timeout: GIT_TIMEOUT_MS, stdio: ["ignore", "pipe", "ignore"] })
        .toString()
        .trim();
    } catch {
      // No git, or not a repository: the commit is reported as unknown.
      gitCommit = "";
    }
  }
  if (!/^[0-9a-f]{7,64}$/i.test(gitCommit) && !env.CLOUD_GIT_COMMIT) gitCommit = "";
  return { version, gitCommit: gitCommit || "unknown", runtimeVersion: process.version };
}

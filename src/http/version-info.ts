/**
 * Resolves the system version record once at startup: `version` from package.json, `gitCommit` from
 * CLOUD_GIT_COMMIT or `git rev-parse HEAD` in the install directory ("unknown" when neither works),
 * `runtimeVersion` from the running Node.js.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { VersionInfo } from "./routes/system.js";

/** `git rev-parse` must not hold up startup. */
const GIT_TIMEOUT_MS = 2_000;

export function resolveVersionInfo(opts: { rootDir: string; env?: Readonly<Record<string, string | undefined>> }): VersionInfo {
  const env = opts.env ?? process.env;
  let version = "unknown";
  try {
    const pkg = JSON.parse(readFileSync(join(opts.rootDir, "package.json"), "utf8")) as { version?: unknown };
    if (typeof pkg.version === "string") version = pkg.version;
  } catch {
    // A broken install still answers the route; "unknown" says what happened.
  }
  let gitCommit = env.CLOUD_GIT_COMMIT?.trim() || "";
  if (!gitCommit) {
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

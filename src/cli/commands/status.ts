/** `cloudctl status` and `cloudctl version`. */
import { existsSync, readFileSync } from "node:fs";
import { arch, platform } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Command } from "commander";
import { listOf } from "../http-client.js";
import { groupStatus } from "../render.js";
import type { RuntimeFactory } from "../runtime.js";
import type { GroupListItem } from "./group.js";

/** Reads the package version by walking up from this file to the project's package.json (works from src/ and dist/). */
export function cliVersion(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let depth = 0; depth < 6; depth++) {
    const candidate = join(dir, "package.json");
    if (existsSync(candidate)) {
      const pkg = JSON.parse(readFileSync(candidate, "utf8")) as { version?: string; bin?: Record<string, string> };
      if (pkg.bin?.cloudctl) return pkg.version ?? "unknown";
    }
    dir = dirname(dir);
  }
  return "unknown";
}

/**
 * The local part of `cloudctl version --json`. The spec's key `go` names the runtime the client
 * was built with; for this client that is Node.js, so `go` carries the Node.js version and the
 * additive key `node` says so explicitly.
 */
export function localVersion(): Record<string, string> {
  return { cli: cliVersion(), go: process.version, node: process.version, os: platform(), arch: arch() };
}

/** What `cloudctl --version` prints: the version, the runtime and the platform on one line. */
export function versionLine(): string {
  const local = localVersion();
  return `cloudctl ${local.cli} (node ${local.node}, ${local.os}/${local.arch})`;
}

/**
 * The human lines of `version`: the controller's fields under names that say what they are. The
 * record's `javaVersion` only repeats `runtimeVersion` (a name the spec keeps); it is not shown.
 */
export function versionPairs(local: Record<string, string>, controller: Record<string, unknown> | null, controllerError?: string): [string, unknown][] {
  const pairs: [string, unknown][] = [
    ["cloudctl", local.cli],
    ["runtime", `node ${local.node}`],
    ["os/arch", `${local.os}/${local.arch}`],
  ];
  if (controller) {
    const runtime = controller.runtimeVersion ?? controller.javaVersion;
    pairs.push(["controller", controller.version ?? "unknown"]);
    if (controller.gitCommit !== undefined) pairs.push(["controller commit", controller.gitCommit]);
    if (runtime !== undefined) pairs.push(["controller runtime", `node ${String(runtime)}`]);
    for (const [key, value] of Object.entries(controller)) {
      if (!["version", "gitCommit", "runtimeVersion", "javaVersion"].includes(key)) pairs.push([`controller ${key}`, value]);
    }
  }
  if (controllerError) pairs.push(["controller", `unavailable (${controllerError})`]);
  return pairs;
}

interface Overview {
  nodeCount?: number;
  instanceCount?: number;
  playerCount?: number;
  groupCount?: number;
}

/** Registers status and version. */
export function registerStatusCommands(program: Command, runtime: RuntimeFactory): void {
  program
    .command("status")
    .description("controller overview: counts, version and groups")
    .action(async (_opts, cmd: Command) => {
      const rt = runtime(cmd);
      const client = rt.client();
      const overview = await client.get<Overview>("/api/v1/overview");
      if (rt.json) {
        rt.out.raw(overview.raw);
        return;
      }
      const [groups, version] = await Promise.all([
        client.get("/api/v1/groups"),
        // The version is an extra line of the overview; an older or unreachable route leaves it out.
        client.get<Record<string, unknown>>("/api/v1/system/version").catch(() => null),
      ]);
      const target = rt.resolved;
      const o = rt.out;
      o.fields([
        ["Controller", client.baseUrl],
        ["Context", target.contextName ?? "(none)"],
        ["Version", version?.data?.version ?? "unknown"],
        ["Nodes", overview.data?.nodeCount ?? 0],
        ["Instances", overview.data?.instanceCount ?? 0],
        ["Players", overview.data?.playerCount ?? 0],
        ["Groups", overview.data?.groupCount ?? 0],
      ]);
      const rows = listOf<GroupListItem>(groups.data).map((g) => [
        g.name,
        o.state(groupStatus(g)),
        `${g.runningInstances ?? 0}/${g.minInstances ?? 0}-${g.maxInstances ?? 0}`,
        g.totalPlayers ?? 0,
      ]);
      o.line();
      o.table(["GROUP", "STATUS", "INSTANCES", "PLAYERS"], rows);
    });

  program
    .command("version")
    .description("client version, plus the controller's when reachable")
    .action(async (_opts, cmd: Command) => {
      const rt = runtime(cmd);
      const local = localVersion();
      const result: Record<string, unknown> = { ...local };
      let target;
      try {
        target = rt.resolved;
      } catch {
        // No usable context: the client's own version is still worth printing.
        target = undefined;
      }
      let controllerError: string | undefined;
      let controller: Record<string, unknown> | null = null;
      if (target?.controller) {
        try {
          const client = rt.clientFor(target.controller, target.token);
          const response = await client.get<Record<string, unknown>>("/api/v1/system/version");
          if (response.data && typeof response.data === "object") {
            controller = response.data;
            for (const [key, value] of Object.entries(response.data)) result[`controller_${key}`] = value;
          }
        } catch (error) {
          controllerError = (error as Error).message;
        }
      }
      if (rt.json) {
        rt.out.jsonValue(result);
        return;
      }
      rt.out.fields(versionPairs(local, controller, controllerError));
    });
}

/**
 * The development profile's local daemon: `npm start` runs a `cloud-daemon` child process next to
 * the controller, so instances run with no other software. Its files live in `<dir>` (daemon.yml,
 * its identity in `data/`, instance directories in `work/`). The first start creates a node join
 * token through the controller's token service; later starts reuse the stored identity.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { totalmem } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { stringify as toYaml } from "yaml";
import type { NodeTokenService } from "../domain/node-tokens/node-token-service.js";
import type { Logger } from "../logs/types.js";

/** How long the local daemon gets to stop its instances after SIGTERM before it is killed. */
export const localDaemonStopTimeoutMs = 10_000;
/** Memory the local daemon offers instances unless told: half the host's, at most 8 GiB. */
export const localDaemonMemoryMbDefault = Math.min(8_192, Math.floor(totalmem() / (2 * 1024 * 1024)));

export interface LocalDaemonOptions {
  /** Directory of the daemon's files, e.g. `data/daemon`. */
  dir: string;
  /** Repository (or install) root: the daemon's working directory. */
  rootDir: string;
  /** The controller's gRPC port on this machine. */
  grpcPort: number;
  nodeTokens: NodeTokenService;
  logger: Logger;
  maxMemoryMb?: number;
  /** The controller's logging level and format: the daemon's lines then read like the controller's. */
  logging?: { level: string; format: string };
  /** Where the daemon's output goes; standard output by default. */
  output?: NodeJS.WritableStream;
}

/** A running local daemon. */
export interface LocalDaemon {
  child: ChildProcess;
  /** SIGTERM (the daemon stops its instances), SIGKILL after {@link localDaemonStopTimeoutMs}. */
  stop(): Promise<void>;
}

/**
 * Node arguments that run `cloud-daemon` from the tree this module belongs to: `src/daemon/main.ts`
 * through tsx when running from source, `dist/src/daemon/main.js` with plain node when compiled.
 */
export function localDaemonArgs(): string[] {
  const fromSource = import.meta.url.endsWith(".ts");
  const entry = fileURLToPath(new URL(fromSource ? "../daemon/main.ts" : "../daemon/main.js", import.meta.url));
  return fromSource ? ["--import", "tsx", entry] : [entry];
}

/** Writes daemon.yml (with a fresh token when the daemon has no identity yet) and starts the daemon. */
export async function startLocalDaemon(options: LocalDaemonOptions): Promise<LocalDaemon> {
  const dataDir = join(options.dir, "data");
  mkdirSync(dataDir, { recursive: true });
  const joined = existsSync(join(dataDir, "node-id"));
  const config: Record<string, unknown> = {
    controllers: [`127.0.0.1:${options.grpcPort}`],
    nodeId: "local",
    workDir: "work",
    dataDir: "data",
    maxMemoryMb: options.maxMemoryMb ?? localDaemonMemoryMbDefault,
    ...(options.logging ? { logging: { level: options.logging.level, format: options.logging.format } } : {}),
  };
  if (!joined) {
    const created = await options.nodeTokens.create({ nodeId: "local", ttl: "10m" }, "system");
    config.token = created.token;
  }
  const configPath = join(options.dir, "daemon.yml");
  writeFileSync(configPath, `# Written by npm start for the local daemon; rewritten at every start.\n${toYaml(config)}`, { mode: 0o600 });
  const child = spawn(process.execPath, [...localDaemonArgs(), "--config", configPath], {
    cwd: options.rootDir,
    stdio: ["ignore", "pipe", "pipe"],
    // Its own process group: a Ctrl-C in the terminal reaches this process, which stops the daemon
    // in order (SIGTERM, after the controller stopped placing), not the daemon behind its back.
    detached: true,
    // The daemon stops with this process, even when it is killed without a chance to stop the daemon.
    env: { ...process.env, CLOUD_DAEMON_CONFIG: configPath, CLOUD_DAEMON_EXIT_WITH_PARENT: "1" },
  });
  const out = options.output ?? process.stdout;
  child.stdout?.pipe(out, { end: false });
  child.stderr?.pipe(out, { end: false });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.once("exit", (code, signal) => {
    if (code !== 0 && signal !== "SIGTERM")
      options.logger.warn(`The local daemon exited (${signal ?? `status ${code}`}); instances no longer run until it is started again`);
  });
  options.logger.info(`Local daemon started (pid ${child.pid}, files in ${options.dir}, ${config.maxMemoryMb} MB for instances)`);
  return {
    child,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), localDaemonStopTimeoutMs);
      await exited;
      clearTimeout(timer);
    },
  };
}

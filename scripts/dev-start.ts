// `npm start`: the controller on the development profile and a local daemon, everything they write
// under ./data (embedded store, blobs, Raft log, the daemon's identity and instance directories). Configuration: `npm start -- --config <file>`, CLOUD_CONFIG,
// or the defaults; the CLOUD_* environment overrides apply (see README). Ctrl-C stops it cleanly.
// The dashboard is built first when dist/dashboard is missing or older than src/dashboard.
import { join, relative, resolve } from "node:path";
import { ConfigError, loadControllerConfig } from "../src/config/load.js";
import type { ControllerConfig } from "../src/config/schema.js";
import { startController, type RunningController } from "../src/controller/controller.js";
import { startLocalDaemon } from "../src/controller/local-daemon.js";
import { exitOnSignals } from "../src/controller/shutdown.js";
import { routeGrpcLogs, routeProcessWarnings } from "../src/logs/third-party.js";
import { ensureDashboardBuilt } from "./dashboard.js";

const ROOT_DIR = join(import.meta.dirname, "..");
const DATA_DIR = join(ROOT_DIR, "data");

const fail = (message: string, status: number): never => {
  process.stderr.write(`npm start: ${message}\n`);
  process.exit(status);
};

/** True when `path` is `data/` itself or inside it. */
const insideDataDir = (path: string) => {
  const rel = relative(DATA_DIR, resolve(ROOT_DIR, path));
  return rel === "" || (!rel.startsWith("..") && !rel.startsWith("/"));
};

/**
 * The local daemon (a `cloud-daemon` child process joined with a node token, its files under
 * data/daemon), so that `npm start` runs instances with no other software. CLOUD_DEV_DAEMON=false
 * leaves it out. Returns a stop function, or null when there is no daemon.
 */
async function startDevDaemon(controller: RunningController): Promise<(() => Promise<void>) | null> {
  if (process.env.CLOUD_DEV_DAEMON === "false") return null;
  const daemon = await startLocalDaemon({
    dir: join(DATA_DIR, "daemon"),
    rootDir: ROOT_DIR,
    grpcPort: controller.grpcPort,
    nodeTokens: controller.nodeTokens,
    logger: controller.logs.logger("cloud.dev"),
  });
  return () => daemon.stop();
}

async function devStart(): Promise<void> {
  process.chdir(ROOT_DIR);
  let config: ControllerConfig;
  try {
    config = loadControllerConfig();
  } catch (err) {
    if (err instanceof ConfigError) return fail(err.message, 78);
    throw err;
  }
  if (config.runtime.profile !== "development") fail("npm start runs the development profile; start production controllers with cloud-controller", 78);
  if (!insideDataDir(config.data.dir) || !insideDataDir(config.raft.dataDir)) {
    fail(`npm start keeps its files under ${DATA_DIR}; data.dir and raft.dataDir must be inside it`, 78);
  }

  if (await ensureDashboardBuilt()) process.stdout.write("npm start: built the dashboard (dist/dashboard)\n");

  let controller: RunningController | undefined;
  let stopDaemon: (() => Promise<void>) | null = null;
  const starting = startController(config).then(async (started) => {
    controller = started;
    routeGrpcLogs(started.logs);
    routeProcessWarnings(started.logs);
    stopDaemon = await startDevDaemon(started);
    return started;
  });
  exitOnSignals(
    async () => {
      const started = await starting;
      if (stopDaemon) await stopDaemon();
      await started.stop();
    },
    () => controller?.logs.logger("cloud.dev"),
  );
  const started = await starting;
  const dev = started.logs.logger("cloud.dev");
  dev.info(`Development controller ready at ${started.httpUrl} (log in as '${config.auth.adminUsername}'; see README)`);
  dev.info(
    `Dashboard: ${started.httpUrl}/ui/ (sign in as '${config.auth.adminUsername}' with the password of CLOUD_ADMIN_PASSWORD or auth.adminPassword, or the one logged once above at the first start)`,
  );
}

devStart().catch((err: unknown) => fail(err instanceof Error ? (err.stack ?? err.message) : String(err), 1));

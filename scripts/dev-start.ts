// `npm start`: the controller on the development profile and a local daemon, everything they write
// under ./data (embedded store, blobs, Raft log, the daemon's identity and instance directories). Configuration: `npm start -- --config <file>`, CLOUD_CONFIG,
// or the defaults; the CLOUD_* environment overrides apply (see README). Ctrl-C stops it cleanly.
// The dashboard is built first when dist/dashboard is missing or older than src/dashboard.
import { join, relative, resolve } from "node:path";
import { ConfigError, loadControllerConfig } from "../src/config/load.js";
import type { ControllerConfig } from "../src/config/schema.js";
import type { RunningController } from "../src/controller/controller.js";
import { packageVersion, parseBinCommandLine } from "../src/shared/command-line.js";
import { startedByNpm, whenParentGone } from "../src/shared/parent-watch.js";

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
 * `<data.dir>/daemon`, data/daemon by default), so that `npm start` runs instances with no other software. CLOUD_DEV_DAEMON=false
 * leaves it out. Returns a stop function, or null when there is no daemon.
 */
async function startDevDaemon(controller: RunningController, dataDir: string): Promise<(() => Promise<void>) | null> {
  if (process.env.CLOUD_DEV_DAEMON === "false") return null;
  const { startLocalDaemon } = await import("../src/controller/local-daemon.js");
  const daemon = await startLocalDaemon({
    dir: join(resolve(ROOT_DIR, dataDir), "daemon"),
    rootDir: ROOT_DIR,
    grpcPort: controller.grpcPort,
    nodeTokens: controller.nodeTokens,
    logger: controller.logs.logger("cloud.dev"),
    logging: { level: controller.logs.level, format: controller.logs.format },
  });
  return () => daemon.stop();
}

async function devStart(): Promise<void> {
  const line = parseBinCommandLine(
    {
      name: "npm start",
      description: "The development controller (embedded store, one Raft member) and a local daemon, everything under ./data.",
      configHelp: "controller.yml to read (default: CLOUD_CONFIG, else the defaults); data.dir and raft.dataDir must stay inside ./data",
      version: packageVersion(import.meta.url),
      helpAfter: "CLOUD_DEV_DAEMON=false leaves the local daemon out; the CLOUD_* overrides of cloud-controller apply (see README).",
    },
    process.argv.slice(2),
  );
  if (line.kind === "exit") process.exit(line.status);
  const configPath = line.config === undefined ? undefined : resolve(line.config);
  process.chdir(ROOT_DIR);
  // Killed through a wrapper that could not pass the signal on (npm, then a shell): stop as on SIGTERM.
  // `npm start` runs this file with `node --import tsx`, not the tsx command: tsx's signal relay
  // kills its child with SIGKILL when the child does not acknowledge a Ctrl-C within 30 ms, which a
  // busy controller cannot promise, and a killed controller leaves records for the next start to repair.
  whenParentGone(() => process.kill(process.pid, "SIGTERM"), { generations: startedByNpm() ? 3 : 1 });
  let config: ControllerConfig;
  try {
    config = loadControllerConfig(configPath !== undefined ? { path: configPath } : { argv: [] });
  } catch (err) {
    if (err instanceof ConfigError) return fail(err.message, 78);
    throw err;
  }
  if (config.runtime.profile !== "development") fail("npm start runs the development profile; start production controllers with cloud-controller", 78);
  if (!insideDataDir(config.data.dir) || !insideDataDir(config.raft.dataDir)) {
    fail(`npm start keeps its files under ${DATA_DIR}; data.dir and raft.dataDir must be inside it`, 78);
  }

  // Loaded only now: --help, --version and a wrong command line answer without loading the controller.
  const [{ startController }, { exitOnSignals }, { routeGrpcLogs, routeProcessWarnings }, { ensureDashboardBuilt }] = await Promise.all([
    import("../src/controller/controller.js"),
    import("../src/controller/shutdown.js"),
    import("../src/logs/third-party.js"),
    import("./dashboard.js"),
  ]);
  if (await ensureDashboardBuilt()) process.stdout.write("npm start: built the dashboard (dist/dashboard)\n");

  let controller: RunningController | undefined;
  let stopDaemon: (() => Promise<void>) | null = null;
  const starting = startController(config, { configPath }).then(async (started) => {
    controller = started;
    routeGrpcLogs(started.logs);
    routeProcessWarnings(started.logs);
    stopDaemon = await startDevDaemon(started, config.data.dir);
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
  dev.info(`cloudctl from this directory: npx cloudctl setup --controller ${started.httpUrl} -u ${config.auth.adminUsername}   (then npx cloudctl --help)`);
  dev.info(
    `Dashboard: ${started.httpUrl}/ui/ (sign in as '${config.auth.adminUsername}' with the password of CLOUD_ADMIN_PASSWORD or auth.adminPassword, or the one logged once above at the first start)`,
  );
}

devStart().catch((err: unknown) => fail(err instanceof Error ? (err.stack ?? err.message) : String(err), 1));

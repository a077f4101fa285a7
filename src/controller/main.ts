#!/usr/bin/env node
/**
 * `cloud-controller`: loads controller.yml (`--config <path>` or CLOUD_CONFIG; defaults without
 * one), starts the controller and stops it gracefully on SIGINT or SIGTERM. The command line is
 * parsed first and strictly: `--help` and `--version` print and exit 0, anything unknown exits 64
 * before a file is written or a port bound. A configuration error prints one clear line to
 * standard error and exits with status 78 (EX_CONFIG).
 */
import { CONFIG_ENV_OVERRIDES, ConfigError, loadControllerConfig, resolveConfigPath } from "../config/load.js";
import type { ControllerConfig } from "../config/schema.js";
import type { RunningController } from "./controller.js";
import { packageVersion, parseBinCommandLine } from "../shared/command-line.js";

/** Exit status for an invalid configuration (sysexits EX_CONFIG). */
const EXIT_CONFIG_ERROR = 78;
/** Exit status when startup fails for any other reason. */
const EXIT_STARTUP_FAILED = 1;

const describe = (err: unknown) => (err instanceof Error ? (err.stack ?? err.message) : String(err));

/** `--help` text after the options: the environment overrides and the exit statuses. */
const controllerHelpAfter = `Environment (wins over the file):
  CLOUD_CONFIG            path of controller.yml (when --config is not given)
${CONFIG_ENV_OVERRIDES.map((o) => `  ${o.env.padEnd(22)}  ${o.key}`).join("\n")}

Exit status: 0 after SIGINT/SIGTERM, 64 for a wrong command line, 78 for a configuration error,
1 when startup fails otherwise. Every key and its default: controller.example.yml.`;

async function main(): Promise<void> {
  const line = parseBinCommandLine(
    {
      name: "cloud-controller",
      description: "The controller of the game-server control plane: REST API, daemon gateway, Raft peer and scheduler.",
      configHelp: "controller.yml to read (default: CLOUD_CONFIG, else every key takes its default)",
      version: packageVersion(import.meta.url),
      helpAfter: controllerHelpAfter,
    },
    process.argv.slice(2),
  );
  if (line.kind === "exit") process.exit(line.status);
  // The file read now is the one a join writes cluster.id into: the cluster is given its path.
  const configPath = line.config ?? resolveConfigPath([], process.env) ?? null;
  let config: ControllerConfig;
  try {
    config = loadControllerConfig(configPath !== null ? { path: configPath } : {});
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`cloud-controller: ${err.message}\n`);
    process.exit(EXIT_CONFIG_ERROR);
  }

  // Loaded only now: --help, --version and a wrong command line answer without loading the controller.
  const [{ startController }, { exitOnSignals }, { routeGrpcLogs, routeProcessWarnings }] = await Promise.all([
    import("./controller.js"),
    import("./shutdown.js"),
    import("../logs/third-party.js"),
  ]);
  let controller: RunningController | undefined;
  const starting = startController(config, { configPath }).then((started) => {
    controller = started;
    // Process-wide hooks belong to the process entry, not to the (re-entrant) composition root.
    routeGrpcLogs(started.logs);
    routeProcessWarnings(started.logs);
    return started;
  });
  exitOnSignals(
    async () => (await starting).stop(),
    () => controller?.logs.logger("cloud.controller.main"),
  );
  try {
    await starting;
  } catch (err) {
    process.stderr.write(`cloud-controller: startup failed: ${describe(err)}\n`);
    process.exit(EXIT_STARTUP_FAILED);
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`cloud-controller: ${describe(err)}\n`);
  process.exit(EXIT_STARTUP_FAILED);
});

#!/usr/bin/env node
/**
 * `cloud-controller`: loads controller.yml (`--config <path>` or CLOUD_CONFIG; defaults without
 * one), starts the controller and stops it gracefully on SIGINT or SIGTERM. A configuration error
 * prints one clear line to standard error and exits with status 78 (EX_CONFIG).
 */
import { ConfigError, loadControllerConfig } from "../config/load.js";
import type { ControllerConfig } from "../config/schema.js";
import { routeGrpcLogs, routeProcessWarnings } from "../logs/third-party.js";
import { startController, type RunningController } from "./controller.js";
import { exitOnSignals } from "./shutdown.js";

/** Exit status for an invalid configuration (sysexits EX_CONFIG). */
const EXIT_CONFIG_ERROR = 78;
/** Exit status when startup fails for any other reason. */
const EXIT_STARTUP_FAILED = 1;

const describe = (err: unknown) => (err instanceof Error ? (err.stack ?? err.message) : String(err));

async function main(): Promise<void> {
  let config: ControllerConfig;
  try {
    config = loadControllerConfig();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`cloud-controller: ${err.message}\n`);
    process.exit(EXIT_CONFIG_ERROR);
  }

  let controller: RunningController | undefined;
  const starting = startController(config).then((started) => {
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

#!/usr/bin/env node
/**
 * `cloud-controller`: loads controller.yml (`--config <path>` or CLOUD_CONFIG; defaults without
 * one), starts the controller and stops it gracefully on SIGINT or SIGTERM. A configuration error
 * prints one clear line to standard error and exits with {@link EXIT_CONFIG_ERROR}.
 */
import { ConfigError, loadControllerConfig } from "../config/load.js";
import { routeGrpcLogs, routeProcessWarnings } from "../logs/third-party.js";
import { startController, type RunningController } from "./controller.js";

/** Exit status for an invalid configuration (sysexits EX_CONFIG). */
const EXIT_CONFIG_ERROR = 78;
/** Exit status when startup fails for any other reason. */
const EXIT_STARTUP_FAILED = 1;
/** A shutdown taking longer than this is abandoned and the process exits with status 1. */
const SHUTDOWN_TIMEOUT_MS = 15_000;

async function main(): Promise<void> {
  let config;
  try {
    config = loadControllerConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`cloud-controller: ${err.message}\n`);
      process.exit(EXIT_CONFIG_ERROR);
    }
    throw err;
  }

  let controller: RunningController;
  try {
    controller = await startController(config);
  } catch (err) {
    process.stderr.write(`cloud-controller: startup failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(EXIT_STARTUP_FAILED);
  }
  // Process-wide hooks belong to the process entry, not to the (re-entrant) composition root.
  routeGrpcLogs(controller.logs);
  routeProcessWarnings(controller.logs);
  const log = controller.logs.logger("cloud.controller.main");

  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals++;
    if (signals > 1) {
      log.warn(`Received ${signal} again; exiting now`);
      process.exit(130);
    }
    log.info(`Received ${signal}; shutting down`);
    const timer = setTimeout(() => {
      log.error(`Shutdown did not finish within ${SHUTDOWN_TIMEOUT_MS} ms; exiting`);
      process.exit(1);
    }, SHUTDOWN_TIMEOUT_MS);
    timer.unref();
    controller.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error("Shutdown failed", err);
        process.exit(1);
      },
    );
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
}

main().catch((err: unknown) => {
  process.stderr.write(`cloud-controller: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(EXIT_STARTUP_FAILED);
});

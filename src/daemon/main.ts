#!/usr/bin/env node
/**
 * `cloud-daemon`: the node daemon. Reads daemon.yml (`--config <file>` or CLOUD_DAEMON_CONFIG),
 * joins the cluster once with the node join token, then stays connected to a controller and runs
 * the instances it is told to. SIGINT/SIGTERM stop every instance (bounded) before the daemon
 * exits; a second signal, or any other exit, kills them at once so no server outlives the daemon.
 * Exit status: 0 after SIGINT/SIGTERM, 78 for a configuration problem, 77 when the join is refused
 * or the controller's protocol is incompatible, 1 otherwise.
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { DaemonConfigError, loadDaemonConfig, locateDaemonConfig } from "./config.js";
import { GatewayClientError, type ClientLogger } from "./gateway-client.js";
import { createNodeDaemon } from "./node-daemon.js";

/** Exit status for a configuration problem (EX_CONFIG). */
export const EXIT_CONFIG = 78;
/** Exit status for a refused join or an incompatible controller (EX_NOPERM). */
export const EXIT_REFUSED = 77;

/** The version of the nearest package.json above this file (source tree or build output). */
function daemonVersion(): string {
  let dir = import.meta.dirname;
  for (let depth = 0; depth < 6; depth++) {
    const path = join(dir, "package.json");
    if (existsSync(path)) {
      try {
        return (JSON.parse(readFileSync(path, "utf8")) as { version?: string }).version ?? "0.0.0";
      } catch {
        // The version is only reported in the hello; a broken package.json must not stop the daemon.
        return "0.0.0";
      }
    }
    dir = dirname(dir);
  }
  return "0.0.0";
}

function lineLogger(): ClientLogger {
  const write = (level: string, message: string) => process.stdout.write(`${new Date().toISOString()} ${level} cloud.daemon ${message}\n`);
  return { info: (m) => write("INFO", m), warn: (m) => write("WARN", m), error: (m) => write("ERROR", m) };
}

async function main(): Promise<void> {
  // Replaced by the daemon's own logger once it exists: that one also mirrors to the controller.
  let logger: ClientLogger = lineLogger();
  let config;
  try {
    config = loadDaemonConfig(locateDaemonConfig(process.argv.slice(2), process.env));
  } catch (err) {
    if (err instanceof DaemonConfigError) {
      process.stderr.write(`cloud-daemon: ${err.message}\n`);
      process.exit(EXIT_CONFIG);
    }
    throw err;
  }
  const daemon = await createNodeDaemon({
    config,
    daemonVersion: daemonVersion(),
    logger,
    onStateChange: (state, detail) => logger.info(`state ${state}: ${detail}`),
    onFatal: (error) => {
      logger.error(error.message);
      process.exit(EXIT_REFUSED);
    },
  });
  logger = daemon.logger;
  // Whatever ends the process, no game server may outlive the daemon.
  process.on("exit", () => daemon.killAllNow());
  let signalled = false;
  const shutdown = (signal: string) => {
    if (signalled) {
      logger.warn(`Received ${signal} again; killing every instance`);
      process.exit(0);
    }
    signalled = true;
    logger.info(`Received ${signal}; stopping every instance (at most ${daemon.shutdownTimeoutMs} ms)`);
    void daemon.shutdown().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error(`Shutdown failed: ${(err as Error).message}`);
        process.exit(1);
      },
    );
  };
  process.on("SIGINT", () => shutdown("SIGINT"));
  process.on("SIGTERM", () => shutdown("SIGTERM"));
  try {
    await daemon.start();
  } catch (err) {
    if (signalled) return; // a join interrupted by the shutdown
    if (err instanceof GatewayClientError) {
      logger.error(err.message);
      process.exit(EXIT_REFUSED);
    }
    if ((err as NodeJS.ErrnoException).code === "EADDRINUSE") {
      // The plugin relay's fixed port (pluginRelay.port) is taken: a configuration problem.
      process.stderr.write(`cloud-daemon: pluginRelay.port ${config.pluginRelay.port} is already in use on 127.0.0.1\n`);
      process.exit(EXIT_CONFIG);
    }
    throw err;
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`cloud-daemon: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});

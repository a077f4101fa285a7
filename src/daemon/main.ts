#!/usr/bin/env node
/**
 * `cloud-daemon`: the node daemon. Reads daemon.yml (`--config <file>` or CLOUD_DAEMON_CONFIG),
 * joins the cluster once with the node join token, then stays connected to a controller and runs
 * the instances it is told to. SIGINT/SIGTERM stop every instance (bounded) before the daemon
 * exits; a second signal, or any other exit, kills them at once so no server outlives the daemon.
 * Exit status: 0 after SIGINT/SIGTERM, 78 for a configuration problem, 77 when the join is refused
 * or the controller's protocol is incompatible, 1 otherwise.
 */
import { createLogService } from "../logs/logger.js";
import { EXIT_USAGE, packageVersion, parseBinCommandLine } from "../shared/command-line.js";
import { whenParentGone } from "../shared/parent-watch.js";
import { signalCounter } from "../shared/signals.js";
import { DAEMON_CONFIG_ENV, DaemonConfigError, loadDaemonConfig, locateDaemonConfig } from "./config.js";
import type { ClientLogger } from "./gateway-client.js";

/** Exit status for a configuration problem (EX_CONFIG). */
export const EXIT_CONFIG = 78;
/** Exit status for a refused join or an incompatible controller (EX_NOPERM). */
export const EXIT_REFUSED = 77;
/** Set to 1 by the process that starts a daemon it owns: the daemon then stops when that process is gone. */
export const EXIT_WITH_PARENT_ENV = "CLOUD_DAEMON_EXIT_WITH_PARENT";

const helpAfter = `Configuration: --config, else ${DAEMON_CONFIG_ENV}, else ./daemon.yml (every key: daemon.example.yml).
The first start joins with the node join token of daemon.yml (cloudctl token create).

Exit status: 0 after SIGINT/SIGTERM, ${EXIT_USAGE} for a wrong command line, ${EXIT_CONFIG} for a configuration
problem, ${EXIT_REFUSED} when the join is refused or the controller's protocol is incompatible, 1 otherwise.`;

/**
 * The daemon's log lines come from the controller's own log service (src/logs/logger.ts), so both
 * read alike side by side: the HUMAN layout (`2026-11-27 13:12:28.661 [main] INFO  daemon - …`) or
 * JSON, as daemon.yml's `logging.format` says, at `logging.level`.
 */
function daemonLogger(logging: { level: string; format: string }): ClientLogger {
  return createLogService(logging).logger("cloud.daemon");
}

async function main(): Promise<void> {
  const line = parseBinCommandLine(
    {
      name: "cloud-daemon",
      description: "The node daemon: joins the cluster once, keeps a stream to a controller and runs the instances it is told to.",
      configHelp: `daemon.yml to read (default: ${DAEMON_CONFIG_ENV}, else ./daemon.yml)`,
      version: packageVersion(import.meta.url),
      helpAfter,
    },
    process.argv.slice(2),
  );
  if (line.kind === "exit") process.exit(line.status);
  let config;
  try {
    config = loadDaemonConfig(locateDaemonConfig(line.config !== undefined ? ["--config", line.config] : [], process.env));
  } catch (err) {
    if (err instanceof DaemonConfigError) {
      process.stderr.write(`cloud-daemon: ${err.message}\n`);
      process.exit(EXIT_CONFIG);
    }
    throw err;
  }
  // Replaced by the daemon's own logger once it exists: that one also mirrors to the controller.
  let logger = daemonLogger(config.logging);
  // Loaded only now: --help, --version and a wrong command line answer without loading the daemon.
  const [{ createNodeDaemon }, { GatewayClientError }] = await Promise.all([import("./node-daemon.js"), import("./gateway-client.js")]);
  const daemon = await createNodeDaemon({
    config,
    daemonVersion: packageVersion(import.meta.url),
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
  const classify = signalCounter();
  const shutdown = (why: string) => {
    const kind = classify();
    if (kind === "echo") return; // the same interrupt, relayed by a wrapper or sent to the whole group
    if (kind === "repeat") {
      logger.warn(`${why} again; killing every instance`);
      process.exit(0);
    }
    signalled = true;
    logger.info(`${why}; stopping every instance (at most ${daemon.shutdownTimeoutMs} ms)`);
    void daemon.shutdown().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error(`Shutdown failed: ${(err as Error).message}`);
        process.exit(1);
      },
    );
  };
  process.on("SIGINT", () => shutdown("Received SIGINT"));
  process.on("SIGTERM", () => shutdown("Received SIGTERM"));
  // A daemon started by a development controller (`npm start`) stops with it, however it ended.
  if (process.env[EXIT_WITH_PARENT_ENV] === "1") whenParentGone(() => shutdown("The process that started the daemon is gone"));
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

// The node daemon of the failover benchmark: `cloud-daemon`'s composition (createNodeDaemon: the
// real runner, gateway client, reporter and template cache) with one change, the `simulated`
// platform's servers listen on 127.0.0.1 instead of every interface. The daemon passes only a fixed
// list of its own variables to instances and a group carries no environment, so the bind address
// of the simulated server (CLOUD_SIM_BIND_HOST) can only be set through the platform definition.
// With BENCH_SIMULATED_READINESS=log-line the `simulated` platform is ready on the server's `Done (`
// console line (the rule of `simulated-standalone` and of the Java platforms) instead of the
// plugin's ready call.
//
//   CLOUD_DAEMON_CONFIG=<daemon.yml> node --import tsx scripts/bench/failover-daemon.ts
//
// SIGTERM stops every instance (bounded) and exits 0; any other exit kills the instances at once.
import { loadDaemonConfig, locateDaemonConfig } from "../../src/daemon/config.js";
import type { ClientLogger } from "../../src/daemon/gateway-client.js";
import { createNodeDaemon } from "../../src/daemon/node-daemon.js";
import { builtInPlatforms, simulatedPlatform } from "../../src/daemon/platforms.js";

const loopbackEnv = { CLOUD_SIM_BIND_HOST: "127.0.0.1" };

function lineLogger(): ClientLogger {
  const write = (level: string, message: string) => process.stdout.write(`${new Date().toISOString()} ${level} failover-daemon ${message}\n`);
  return { info: (m) => write("INFO", m), warn: (m) => write("WARN", m), error: (m) => write("ERROR", m) };
}

const logger = lineLogger();
const platforms = builtInPlatforms();
const readiness = process.env.BENCH_SIMULATED_READINESS === "log-line" ? { readiness: { kind: "log-line", pattern: "Done (" } as const } : {};
platforms.set("simulated", simulatedPlatform({ env: loopbackEnv, ...readiness }));
platforms.set("simulated-standalone", simulatedPlatform({ id: "simulated-standalone", readiness: { kind: "log-line", pattern: "Done (" }, env: loopbackEnv }));

const daemon = await createNodeDaemon({
  config: loadDaemonConfig(locateDaemonConfig(process.argv.slice(2), process.env)),
  daemonVersion: "0.1.0-failover-bench",
  logger,
  platforms,
  onStateChange: (state, detail) => logger.info(`state ${state}: ${detail}`),
  onFatal: (error) => {
    logger.error(error.message);
    process.exit(77);
  },
});
process.on("exit", () => daemon.killAllNow());
let stopping = false;
const shutdown = () => {
  if (stopping) process.exit(0);
  stopping = true;
  void daemon.shutdown().then(
    () => process.exit(0),
    (err: unknown) => {
      logger.error(`Shutdown failed: ${(err as Error).message}`);
      process.exit(1);
    },
  );
};
process.on("SIGINT", shutdown);
process.on("SIGTERM", shutdown);
await daemon.start();

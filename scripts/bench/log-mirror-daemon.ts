// The daemon side of the log-mirror benchmark (scripts/bench/log-mirror.ts), a child process: the
// daemon's own gateway client and log appender (src/daemon/gateway-client.ts, log-mirror.ts), no
// instance runner. It joins with the token, then sends an instance state report every
// `--report-interval-ms` (stamped with its send time, as the reporter sends them: not droppable,
// not background) for `--seconds` quietly, then as long again while logging `--lines-per-second`
// lines through the appender (in bursts every 10 ms). It prints its appender's counters as one
// JSON line (prefix `MIRROR `) and exits.
//
//   node --import tsx scripts/bench/log-mirror-daemon.ts <grpc-address> <token> <data-dir> <seconds> <lines-per-second> <report-interval-ms>
import { GatewayClient } from "../../src/daemon/gateway-client.js";
import { DaemonLogMirror, mirroredLogger } from "../../src/daemon/log-mirror.js";
import { daemonMessage } from "../../src/wire/daemon-proto.js";

const [address, token, dataDir, secondsText, rateText, intervalText] = process.argv.slice(2);
const seconds = Number(secondsText);
const linesPerSecond = Number(rateText);
const reportIntervalMs = Number(intervalText);
const burstMs = 10;

const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined };
// The appender sends through the client built below; nothing is sent before the client exists.
const mirror = new DaemonLogMirror({ send: (message) => client.send(message, { background: true }) });
const logger = mirroredLogger(quiet, mirror, "cloud.daemon.bench");
let connected!: () => void;
const session = new Promise<void>((resolve) => (connected = resolve));
const client = new GatewayClient({
  controllers: [address!],
  token,
  dataDir: dataDir!,
  maxMemoryMb: 1024,
  daemonVersion: "0.1.0-bench",
  hostname: "bench",
  statusIntervalMs: 10_000,
  reconnectDelayMinMs: 50,
  reconnectDelayMaxMs: 500,
  logger,
  onSessionOpen: () => {
    mirror.wake();
    connected();
  },
});

async function phase(name: "quiet" | "flood", durationMs: number): Promise<number> {
  let reports = 0;
  let lines = 0;
  const startedMs = Date.now();
  const reportTimer = setInterval(() => {
    reports++;
    client.send(
      daemonMessage("instance_state", {
        instance_id: `bench-${reports}`,
        group: "bench",
        state: "RUNNING",
        fencing_token: 0,
        port: 0,
        pid: 0,
        exit_code: 0,
        message: name,
        timestamp_ms: Date.now(),
      }),
    );
  }, reportIntervalMs);
  const floodTimer =
    name === "flood"
      ? setInterval(() => {
          const due = Math.floor(((Date.now() - startedMs) * linesPerSecond) / 1000);
          for (; lines < due; lines++) logger.info(`bench line ${lines} ${"x".repeat(80)}`);
        }, burstMs)
      : null;
  await new Promise((resolve) => setTimeout(resolve, durationMs));
  clearInterval(reportTimer);
  if (floodTimer) clearInterval(floodTimer);
  return lines;
}

await client.start();
await session;
await phase("quiet", seconds * 1000);
const lines = await phase("flood", seconds * 1000);
// Lets the queue drain so the controller's count of records is final.
await new Promise((resolve) => setTimeout(resolve, 2_000));
process.stdout.write(`MIRROR ${JSON.stringify({ linesLogged: lines, ...mirror.stats })}\n`);
client.stop();
mirror.close();
process.exit(0);

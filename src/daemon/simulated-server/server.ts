/**
 * The simulated game server: a stand-in for a Minecraft server (or, with CLOUD_SIM_MODE=proxy — the
 * `simulated-proxy` platform — a proxy) so that demos, tests and benchmarks run real processes
 * without Java. It talks to the control plane only through the plugin SDK (src/sdk): ready, players,
 * transfers, metrics, custom events, the event stream, and its console commands run through the
 * SDK's command registry.
 *
 * Players move between simulated instances over TCP, as a proxy connects a player to a backend
 * server: the instance that holds a player (its proxy, or the server it joined directly) receives a
 * transfer on its event stream, connects to the target's port and sends `JOIN <uuid> <name> <from>`;
 * the target takes the player (`WELCOME <id>`) and reports the join, which completes the transfer
 * at the controller. The player session protocol is in {@link acceptSession}.
 *
 * Bundled with the SDK into one CommonJS file (esbuild) so it starts without a TypeScript or ES
 * module loader: hundreds start at once on one machine (contract.ts, docs/decisions/daemon-runner.md).
 * What it loads at boot is kept small: node:http rather than fetch, node:crypto only when a player
 * first joins, stdin split into lines by hand. A file named simulated-crash-on-boot in its working
 * directory (from a template) makes it exit 3 at boot.
 */
import { connect, createServer, type Socket } from "node:net";
import { existsSync } from "node:fs";
import {
  CommandRegistry,
  RED,
  cloudEnvironmentPresent,
  connectToCloud,
  consoleSender,
  fail,
  stripFormatting,
  type CloudPlugin,
  type MetricsPayload,
  type Transfer,
  type TransferResult,
} from "../../sdk/index.js";
import { INSTANCE_ENV, SIMULATED_CRASH_ON_BOOT_FILE, SIMULATED_SERVER_ENV } from "./environment.js";
import { TickModel } from "./tick-model.js";
import { registerConsoleCommands } from "./console-commands.js";

const VERSION = "1.0.0";
const retryBackoffMaxMs = 2_000;
const playersMax = 10_000;
/** Console commands waiting to run at once; more are refused (stdin faster than the commands run). */
const pendingCommandsMax = 10_000;
const PLAYER_NAME = /^[A-Za-z0-9_]{1,16}$/;
const UUID_TEXT = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** A connection that says nothing this long is a status query: it gets the status line. */
const sessionGreetingWaitMs = 250;
/** How long a holder waits for the target's WELCOME before giving the move up. */
const moveWaitMs = 10_000;
/** Longest line of the player session protocol. */
const sessionLineCharsMax = 512;

const env = process.env;
const integerFrom = (text: string | undefined, fallback: number): number => {
  const value = Number(text);
  return text !== undefined && text !== "" && Number.isInteger(value) && value >= 0 ? value : fallback;
};
const instanceId = env[INSTANCE_ENV.instanceId] ?? "simulated";
const group = env[INSTANCE_ENV.group] ?? "";
const port = integerFrom(env[INSTANCE_ENV.port], 25565);
const memoryMb = integerFrom(env[INSTANCE_ENV.memoryMb], 1024);
// A busy controller may answer late: ten tries over about twenty seconds before giving up.
const readyAttemptsMax = integerFrom(env[SIMULATED_SERVER_ENV.readyAttempts], 10);
const bindHost = env[SIMULATED_SERVER_ENV.bindHost] || "0.0.0.0";
const tickIntervalMs = integerFrom(env[SIMULATED_SERVER_ENV.tickIntervalMs], 5_000);
const startupDelayMs = integerFrom(env[SIMULATED_SERVER_ENV.startupDelayMs], 0);
const stopDelayMs = integerFrom(env[SIMULATED_SERVER_ENV.stopDelayMs], 100);
const ignoreStop = env[SIMULATED_SERVER_ENV.ignoreStop] === "true";
const maxPlayers = integerFrom(env[SIMULATED_SERVER_ENV.maxPlayers], 100);
const proxyMode = env[SIMULATED_SERVER_ENV.mode] === "proxy";
const eventStreamWanted = (env[SIMULATED_SERVER_ENV.eventStream] ?? "true") === "true";
const backendHost = env[SIMULATED_SERVER_ENV.backendHost] || "127.0.0.1";
const metricsIntervalMs = integerFrom(env[SIMULATED_SERVER_ENV.metricsIntervalMs], 0);
const startedAtMs = Date.now();

function log(message: string, level = "INFO"): void {
  const time = new Date().toISOString().slice(11, 19);
  process.stdout.write(`[${time} ${level}]: ${message}\n`);
}

const logger = { info: (message: string) => log(message), warn: (message: string) => log(message, "WARN") };
const plugin: CloudPlugin | null = cloudEnvironmentPresent(env)
  ? connectToCloud({ env, kind: proxyMode ? "proxy" : "server", logger, commands: { onError: (error) => log(`Command failed: ${String(error)}`, "ERROR") } })
  : null;

/**
 * A player on this server (or held by this proxy), by name. On a proxy, `server` is the backend the
 * player is connected to and `session` that connection; on a server, `session` is the connection of
 * the proxy that brought the player (null for a player who joined here directly).
 */
interface LocalPlayer {
  uuid: string;
  server: string | null;
  session: Socket | null;
}
const players = new Map<string, LocalPlayer>();
const ticks = new TickModel(startedAtMs);
let tickCount = 0;
let stopping = false;
let tickTimer: ReturnType<typeof setInterval> | null = null;
let metricsTimer: ReturnType<typeof setInterval> | null = null;

/** The UUID an offline-mode Minecraft server gives a player name (version 3, "OfflinePlayer:"). */
async function offlineUuid(name: string): Promise<string> {
  const { createHash } = await import("node:crypto");
  const bytes = createHash("md5").update(`OfflinePlayer:${name}`).digest();
  bytes[6] = (bytes[6] & 0x0f) | 0x30;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const hex = bytes.toString("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

const nameOfUuid = (uuid: string): string | undefined => [...players].find(([, player]) => player.uuid === uuid.toLowerCase())?.[0];

function statusLine(): string {
  return `SIMULATED ${instanceId} group=${group} players=${players.size}/${maxPlayers} uptimeMs=${Date.now() - startedAtMs}\n`;
}

const server = createServer((socket) => acceptSession(socket));

/**
 * A TCP connection to the server's port. One that sends nothing within
 * {@link sessionGreetingWaitMs} (or anything but a JOIN) gets the status line and is closed. A player
 * session starts with `JOIN <uuid> <name> <from-instance>`: the player is taken and reported
 * (`player-join`), the answer is `WELCOME <instance-id>` (or `DENIED <reason>`). Then the connecting
 * side ends it with `MOVED` (the player went on to another server, whose join moved it in the
 * registry), `QUIT` (the player left the network; the proxy reported it) or `STAY` (the player is
 * this server's own from now on, as after a direct transfer); a connection that just closes is a
 * lost player, reported as a leave.
 */
function acceptSession(socket: Socket): void {
  socket.on("error", () => {});
  socket.setEncoding("utf8");
  let pending = "";
  let name: string | null = null;
  let ended: "MOVED" | "QUIT" | "STAY" | null = null;
  const greeting = setTimeout(() => socket.end(statusLine()), sessionGreetingWaitMs);
  socket.on("data", (chunk: string) => {
    pending += chunk;
    if (pending.length > sessionLineCharsMax && !pending.includes("\n")) return void socket.destroy();
    for (let end = pending.indexOf("\n"); end >= 0; end = pending.indexOf("\n")) {
      const line = pending.slice(0, end).trim();
      pending = pending.slice(end + 1);
      if (name === null) {
        clearTimeout(greeting);
        const [verb, uuid, playerName, from] = line.split(" ");
        if (verb !== "JOIN") return void socket.end(statusLine());
        if (!UUID_TEXT.test(uuid ?? "") || !PLAYER_NAME.test(playerName ?? "")) return void socket.end("DENIED bad player\n");
        if (!players.has(playerName) && players.size >= Math.min(maxPlayers, playersMax)) return void socket.end("DENIED full\n");
        name = playerName;
        const joining = playerName;
        // The controller admits the player first (maintenance); nothing else is sent before WELCOME.
        void admit(uuid, joining).then((refusal) => {
          if (socket.destroyed) return;
          if (refusal !== null) {
            log(`${joining} was refused: ${refusal}`, "WARN");
            return void socket.end(`DENIED ${refusal}\n`);
          }
          const previous = players.get(joining);
          previous?.session?.destroy();
          players.set(joining, { uuid, server: null, session: socket });
          log(`${joining}[/${socket.remoteAddress ?? "?"}] logged in (uuid ${uuid}) through ${from ?? "?"}`);
          plugin?.players.trackLocalJoin(uuid, joining);
          socket.write(`WELCOME ${instanceId}\n`);
        });
      } else if (line === "MOVED" || line === "QUIT" || line === "STAY") {
        ended = line;
        const player = players.get(name);
        if (player?.session !== socket) continue;
        if (line === "STAY") player.session = null;
        else {
          players.delete(name);
          plugin?.players.trackLocalLeave(player.uuid);
          log(line === "MOVED" ? `${name} moved on to another server` : `${name} left the network`);
        }
      }
    }
  });
  socket.on("close", () => {
    clearTimeout(greeting);
    if (name === null || ended !== null) return;
    const player = players.get(name);
    if (player?.session === socket) leave(name, "lost connection");
  });
}

function stop(reason: string): void {
  if (stopping) return;
  stopping = true;
  log(`Stopping server${reason ? ` (${reason})` : ""}`);
  if (tickTimer !== null) clearInterval(tickTimer);
  if (metricsTimer !== null) clearInterval(metricsTimer);
  server.close();
  void plugin?.close();
  setTimeout(() => {
    log("Saving worlds... done");
    process.exit(0);
  }, stopDelayMs);
}

function metricsSnapshot(): MetricsPayload {
  const now = Date.now();
  const averages = ticks.read(now);
  const heap = process.memoryUsage();
  const chunkCount = 441 + players.size * 100;
  const entityCount = 50 + players.size * 10 + Math.round(ticks.loadPercent);
  return {
    ...averages,
    heapUsedMb: Math.round(heap.heapUsed / 1048576),
    heapMaxMb: memoryMb,
    heapCommittedMb: Math.round(heap.heapTotal / 1048576),
    gcCollections: 0,
    gcTimeMs: 0,
    threadCount: 1,
    daemonThreadCount: 0,
    playerCount: players.size,
    maxPlayers,
    worldCount: 1,
    totalEntities: entityCount,
    totalChunks: chunkCount,
    worlds: [{ name: "world", environment: "NORMAL", entityCount, chunkCount, playerCount: players.size }],
    serverVersion: `simulated-${VERSION}`,
    pluginCount: 1,
    uptimeMs: now - startedAtMs,
  };
}

function reportMetrics(): MetricsPayload {
  const metrics = metricsSnapshot();
  plugin?.client.reportMetrics(metrics);
  return metrics;
}

// ---- players -------------------------------------------------------------------------------

/**
 * Asks the controller to admit a player (`player-join`, awaited): null when admitted, else the
 * message the player is shown (maintenance). A controller that cannot answer admits the player.
 */
async function admit(uuid: string, name: string): Promise<string | null> {
  if (plugin === null) return null;
  try {
    const admission = await plugin.client.admitPlayer(uuid, name);
    return admission.admitted ? null : admission.message;
  } catch (error) {
    log(`Reporting the join of ${name} failed: ${(error as Error).message}`, "WARN");
    return null;
  }
}

async function join(name: string): Promise<void> {
  if (players.has(name)) return log(`${name} is already online`, "WARN");
  if (players.size >= Math.min(maxPlayers, playersMax)) return log(`${name} cannot join: server full`, "WARN");
  const uuid = await offlineUuid(name);
  const refusal = await admit(uuid, name);
  if (refusal !== null) return log(`${name} was refused: ${refusal}`, "WARN");
  if (players.has(name)) return log(`${name} is already online`, "WARN");
  players.set(name, { uuid, server: null, session: null });
  log(`${name}[/127.0.0.1] logged in (uuid ${uuid})`);
  plugin?.players.trackLocalJoin(uuid, name, proxyMode ? instanceId : null);
}

function leave(name: string, how = "left the game"): void {
  const player = players.get(name);
  if (player === undefined) return log(`${name} is not online`, "WARN");
  players.delete(name);
  log(`${name} ${how}`);
  plugin?.players.trackLocalLeave(player.uuid);
  plugin?.client.reportPlayerLeave(player.uuid);
  // A proxy's player leaves the network: its backend drops it without a report of its own.
  if (player.session !== null && !player.session.destroyed) {
    if (proxyMode) player.session.end("QUIT\n");
    else player.session.end();
  }
}

/**
 * A transfer this instance has to carry out (`event: transfer` on its stream, each id once): it
 * holds the player. It connects the player to the target's port (the target reports the join, which
 * completes the transfer). A proxy keeps the new connection and ends the old one with `MOVED`; a
 * server hands the player over (`STAY`) and lets it go without a leave report: the target's join
 * is the move. Transfers of one player run one after another.
 */
const moves = new Map<string, Promise<void>>();
/** Carries a transfer out after the player's earlier moves; rejects when it failed (the SDK then takes it again if it is re-sent). */
function transferArrived(transfer: Transfer): Promise<void> {
  const uuid = transfer.playerUuid.toLowerCase();
  const attempt = (moves.get(uuid) ?? Promise.resolve()).then(() => carryOut(transfer));
  const next = attempt.catch((error: Error) => log(`Transfer ${transfer.id}: ${error.message}`, "WARN"));
  moves.set(uuid, next);
  void next.finally(() => moves.get(uuid) === next && moves.delete(uuid));
  return attempt;
}

async function carryOut(transfer: Transfer): Promise<void> {
  const name = nameOfUuid(transfer.playerUuid);
  const held = name === undefined ? undefined : players.get(name);
  // Not here (any more): another move or a leave came first; the controller answers the transfer failed.
  if (name === undefined || held === undefined) return;
  if (transfer.targetInstanceId === instanceId || held.server === transfer.targetInstanceId) return;
  const target = await needsPlugin().client.fetchInstance(transfer.targetInstanceId);
  if (typeof target.port !== "number") throw new Error(`${transfer.targetInstanceId} has no port`);
  const session = await openSession(target.port, held.uuid, name);
  if (players.get(name) !== held) {
    session.end("QUIT\n");
    return;
  }
  if (proxyMode) {
    held.session?.end("MOVED\n");
    held.server = transfer.targetInstanceId;
    held.session = session;
    log(`Moving ${name} to ${transfer.targetInstanceId}`);
    session.on("close", () => {
      if (held.session !== session) return;
      held.session = null;
      held.server = null;
      if (!stopping) log(`${name} lost the connection to ${transfer.targetInstanceId}`, "WARN");
    });
    return;
  }
  session.end("STAY\n");
  held.session?.end("MOVED\n");
  players.delete(name);
  plugin?.players.trackLocalLeave(held.uuid);
  log(`${name} left by transfer to ${transfer.targetInstanceId}`);
}

/** Connects a player to the server on `port` (JOIN … then WELCOME); the open connection. */
function openSession(port: number, uuid: string, name: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: backendHost, port });
    let answer = "";
    const fail = (why: string) => {
      clearTimeout(timer);
      socket.destroy();
      reject(new Error(`connecting ${name} to port ${port}: ${why}`));
    };
    const timer = setTimeout(() => fail(`no answer within ${moveWaitMs} ms`), moveWaitMs);
    socket.setEncoding("utf8");
    socket.on("error", (error) => fail(error.message));
    socket.on("close", () => fail("closed"));
    const onData = (chunk: string) => {
      answer += chunk;
      const end = answer.indexOf("\n");
      if (end < 0) return answer.length > sessionLineCharsMax ? fail("answer too long") : undefined;
      const line = answer.slice(0, end);
      if (!line.startsWith("WELCOME ")) return fail(line);
      clearTimeout(timer);
      socket.removeAllListeners("close");
      socket.removeAllListeners("error");
      socket.off("data", onData);
      socket.on("error", () => {});
      socket.on("data", () => {});
      resolve(socket);
    };
    socket.on("data", onData);
    socket.write(`JOIN ${uuid} ${name} ${instanceId}\n`);
  });
}

function transferEnded(transfer: Transfer, result: TransferResult): void {
  if (result.success) log(`Transfer ${transfer.id} of ${transfer.playerName} to ${transfer.targetInstanceId} completed`);
  else log(`Transfer ${transfer.id} of ${transfer.playerName} to ${transfer.targetInstanceId} failed: ${result.failureReason}`, "WARN");
}

// ---- console commands ----------------------------------------------------------------------

const consoleUser = consoleSender((text) => log(stripFormatting(text), text.startsWith(RED) ? "WARN" : "INFO"));
const commands = plugin?.commands ?? new CommandRegistry({ onError: (error) => log(`Command failed: ${String(error)}`, "ERROR") });
const needsPlugin = (): CloudPlugin => plugin ?? fail("No controller configured (CLOUD_CONTROLLER_URL and CLOUD_WORKLOAD_TOKEN)");
registerConsoleCommands(commands, {
  log,
  players,
  join,
  leave,
  stop: () => (ignoreStop ? log("Ignoring stop (CLOUD_SIM_IGNORE_STOP)", "WARN") : stop("stop command")),
  needsPlugin,
  ticks,
  reportMetrics,
  maxPlayers,
  overview: () => commands.overview(consoleUser),
});

// Commands run one after another, in the order they were typed (a join finishes before the next line).
let commandQueue: Promise<void> = Promise.resolve();
let pendingCommands = 0;
function enqueue(line: string): void {
  if (line.trim() === "") return;
  if (pendingCommands >= pendingCommandsMax) return log(`Command dropped: ${pendingCommandsMax} commands already waiting`, "WARN");
  pendingCommands += 1;
  commandQueue = commandQueue
    .then(async () => {
      const outcome = await commands.dispatch(consoleUser, line.trim());
      if (outcome === "unknown") log(`Unknown command "${line.trim().split(/\s+/)[0]}". Type "help" for help.`, "WARN");
    })
    .finally(() => (pendingCommands -= 1));
}

// ---- process, stdin, boot ------------------------------------------------------------------

process.on("SIGTERM", () => (ignoreStop ? log("Ignoring SIGTERM (CLOUD_SIM_IGNORE_STOP)", "WARN") : stop("SIGTERM")));
process.on("SIGINT", () => (ignoreStop ? log("Ignoring SIGINT (CLOUD_SIM_IGNORE_STOP)", "WARN") : stop("SIGINT")));

// Standard input, split into lines (CRLF or LF). It closes when the daemon is gone: nothing can
// drive the server any more.
let pendingInput = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk: string) => {
  pendingInput += chunk;
  for (let end = pendingInput.indexOf("\n"); end >= 0; end = pendingInput.indexOf("\n")) {
    const line = pendingInput.slice(0, end);
    pendingInput = pendingInput.slice(end + 1);
    enqueue(line.endsWith("\r") ? line.slice(0, -1) : line);
  }
});
process.stdin.on("end", () => {
  if (pendingInput !== "") enqueue(pendingInput);
  pendingInput = "";
  void commandQueue.then(() => stop("standard input closed"));
});
process.stdin.on("error", () => stop("standard input closed"));

async function reportReady(active: CloudPlugin): Promise<boolean> {
  for (let attempt = 1; attempt <= readyAttemptsMax; attempt += 1) {
    try {
      await active.client.markReady();
      return true;
    } catch (error) {
      const status = (error as { status?: number }).status ?? 0;
      log(`Plugin API ready ${status > 0 ? `answered ${status}` : `failed: ${(error as Error).message}`} (attempt ${attempt}/${readyAttemptsMax})`, "WARN");
      if (status >= 400 && status < 500) return false;
    }
    if (attempt < readyAttemptsMax) await new Promise((resolve) => setTimeout(resolve, Math.min(retryBackoffMaxMs, 100 * 2 ** attempt)));
  }
  return false;
}

function startEventStream(active: CloudPlugin): void {
  active.transfers.onTransfer(transferArrived);
  active.transfers.onOutcome(transferEnded);
  active.events.subscribeAll((event) => {
    if (event.type.includes(":")) log(`[event] ${event.type} from ${event.source} ${JSON.stringify(event.data)}`);
  });
  active.players.setConnections({
    sendMessage: (uuid, text) => {
      const name = nameOfUuid(uuid);
      if (name !== undefined) log(`[-> ${name}] ${stripFormatting(text)}`);
      return name !== undefined;
    },
    kick: (uuid, reason) => {
      const name = nameOfUuid(uuid);
      if (name !== undefined) leave(name, `was kicked: ${reason}`);
      return name !== undefined;
    },
  });
  active.maintenance.onChange((state) =>
    log(
      `Maintenance is now ${state.globalEnabled ? "on" : "off"}${state.globalEnabled && state.message ? `: ${state.message}` : ""} (group ${state.groupMaintenance ? "in" : "not in"} maintenance)`,
    ),
  );
  active.eventStream.start();
  void active.eventStream.whenConnected().then(() => {
    log("Connected to the event stream");
    return active.maintenance.refresh().catch((error: Error) => log(`Reading maintenance failed: ${error.message}`, "WARN"));
  });
}

log(`Starting simulated game server ${VERSION} (instance ${instanceId}, group ${group || "-"}, node ${process.version})`);
if (proxyMode) log("Running as a proxy: players join here and are connected to the servers transfers name");
// A template may carry this file to make every server started from it crash while booting (a bad
// plugin in a new revision, for the deployment tests).
if (existsSync(SIMULATED_CRASH_ON_BOOT_FILE)) {
  log(`Crashing on boot: ${SIMULATED_CRASH_ON_BOOT_FILE} is present in the working directory`, "ERROR");
  process.exit(3);
}
server.on("error", (error) => {
  log(`Failed to bind to ${bindHost}:${port}: ${error.message}`, "ERROR");
  process.exit(2);
});

setTimeout(() => {
  log(`Starting server on ${bindHost}:${port}`);
  server.listen(port, bindHost, () => {
    const address = server.address();
    const boundPort = typeof address === "object" && address !== null ? address.port : port;
    log(`Done (${((Date.now() - startedAtMs) / 1000).toFixed(3)}s)! For help, type "help" (port ${boundPort})`);
    if (tickIntervalMs > 0) {
      tickTimer = setInterval(() => {
        tickCount += 1;
        log(`[tick] ${tickCount} players=${players.size}`);
      }, tickIntervalMs);
    }
    if (plugin !== null) {
      void reportReady(plugin).then((ok) => log(ok ? "Reported ready to the controller" : "Could not report ready to the controller", ok ? "INFO" : "WARN"));
      if (eventStreamWanted) startEventStream(plugin);
      if (metricsIntervalMs > 0) metricsTimer = setInterval(reportMetrics, metricsIntervalMs);
    }
  });
}, startupDelayMs);

// The simulated game server: a stand-in for a Minecraft server so that demos, tests and benchmarks
// run real processes without Java. Plain CommonJS, Node built-ins only, so it starts without a
// TypeScript loader or the ES module loader; hundreds start at once on one machine, so what it loads
// at boot is kept small: node:http rather than fetch (whose implementation costs more to load than
// the rest of the program), node:crypto only when a player joins, stdin split into lines by hand.
// Contract (environment, readiness line): src/daemon/simulated-server/contract.ts; decisions:
// docs/decisions/daemon-runner.md.
//
// It binds its port (a TCP connection receives one status line), prints console lines (banner,
// periodic ticks), reports ready and players through the plugin API when CLOUD_CONTROLLER_URL and
// CLOUD_WORKLOAD_TOKEN are set, and obeys stdin commands: help, stop, say <text>,
// players join <name>, players leave <name>, list, crash [code], oom. A file named
// simulated-crash-on-boot in its working directory (from a template) makes it exit 3 at boot.
/* global require, process, setTimeout, setInterval, clearInterval, Buffer */
"use strict";
const { createServer } = require("node:net");
const { request: httpRequest } = require("node:http");

const VERSION = "1.0.0";
const pluginRequestTimeoutMs = 10_000;
const playerReportAttemptsMax = 3;
const retryBackoffMaxMs = 2_000;
const playersMax = 10_000;

const env = process.env;
const instanceId = env.CLOUD_INSTANCE_ID ?? "simulated";
const group = env.CLOUD_GROUP ?? "";
const port = integerFrom(env.CLOUD_PORT, 25565);
// A busy controller may answer late: ten tries over about twenty seconds before giving up.
const readyAttemptsMax = integerFrom(env.CLOUD_SIM_READY_ATTEMPTS, 10);
const bindHost = env.CLOUD_SIM_BIND_HOST || "0.0.0.0";
const tickIntervalMs = integerFrom(env.CLOUD_SIM_TICK_INTERVAL_MS, 5_000);
const startupDelayMs = integerFrom(env.CLOUD_SIM_STARTUP_DELAY_MS, 0);
const stopDelayMs = integerFrom(env.CLOUD_SIM_STOP_DELAY_MS, 100);
const ignoreStop = env.CLOUD_SIM_IGNORE_STOP === "true";
const maxPlayers = integerFrom(env.CLOUD_SIM_MAX_PLAYERS, 100);
const controllerUrl = env.CLOUD_CONTROLLER_URL ? env.CLOUD_CONTROLLER_URL.replace(/\/+$/, "") : null;
const workloadToken = env.CLOUD_WORKLOAD_TOKEN || null;
const startedAtMs = Date.now();

/** name -> offline-mode UUID */
const players = new Map();
let ticks = 0;
let stopping = false;
let tickTimer = null;

function integerFrom(text, fallback) {
  const value = Number(text);
  return text !== undefined && text !== "" && Number.isInteger(value) && value >= 0 ? value : fallback;
}

function log(message, level = "INFO") {
  const time = new Date().toISOString().slice(11, 19);
  process.stdout.write(`[${time} ${level}]: ${message}\n`);
}

/** The UUID an offline-mode Minecraft server gives a player name (version 3, "OfflinePlayer:"). */
function offlineUuid(name) {
  const bytes = require("node:crypto").createHash("md5").update(`OfflinePlayer:${name}`).digest();
  bytes[6] = (bytes[6] & 0x0f) | 0x30;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const hex = bytes.toString("hex");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** One POST; resolves with the status code, rejects on a network error or after the timeout. */
function post(url, token, body) {
  return new Promise((resolve, reject) => {
    const payload = JSON.stringify(body);
    // node:https (TLS) is loaded only for an https controller URL.
    const send = url.startsWith("https:") ? require("node:https").request : httpRequest;
    const request = send(
      url,
      {
        method: "POST",
        timeout: pluginRequestTimeoutMs,
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json", "content-length": Buffer.byteLength(payload) },
      },
      (response) => {
        response.resume();
        response.on("end", () => resolve(response.statusCode ?? 0));
        response.on("error", reject);
      },
    );
    request.on("timeout", () => request.destroy(new Error(`no answer within ${pluginRequestTimeoutMs} ms`)));
    request.on("error", reject);
    request.end(payload);
  });
}

/** POSTs to the plugin API; true on a 2xx. Bounded: `attempts` tries with capped backoff. */
async function postPlugin(path, body, attempts) {
  if (controllerUrl === null || workloadToken === null) return false;
  for (let attempt = 1; attempt <= attempts; attempt += 1) {
    try {
      const status = await post(`${controllerUrl}/api/plugin/${path}`, workloadToken, body);
      if (status >= 200 && status < 300) return true;
      log(`Plugin API ${path} answered ${status} (attempt ${attempt}/${attempts})`, "WARN");
      if (status >= 400 && status < 500) return false;
    } catch (error) {
      log(`Plugin API ${path} failed: ${error instanceof Error ? error.message : String(error)} (attempt ${attempt}/${attempts})`, "WARN");
    }
    if (attempt < attempts) await new Promise((resolve) => setTimeout(resolve, Math.min(retryBackoffMaxMs, 100 * 2 ** attempt)));
  }
  return false;
}

function statusLine() {
  return `SIMULATED ${instanceId} group=${group} players=${players.size}/${maxPlayers} uptimeMs=${Date.now() - startedAtMs}\n`;
}

const server = createServer((socket) => {
  socket.on("error", () => {});
  socket.end(statusLine());
});

function stop(reason) {
  if (stopping) return;
  stopping = true;
  log(`Stopping server${reason ? ` (${reason})` : ""}`);
  if (tickTimer !== null) clearInterval(tickTimer);
  server.close();
  setTimeout(() => {
    log("Saving worlds... done");
    process.exit(0);
  }, stopDelayMs);
}

function handleCommand(line) {
  const [command = "", ...args] = line.trim().split(/\s+/);
  switch (command) {
    case "":
      return;
    case "help":
      log("Commands: help, stop, say <text>, players join <name>, players leave <name>, list, crash [code], oom");
      return;
    case "stop":
      if (ignoreStop) log("Ignoring stop (CLOUD_SIM_IGNORE_STOP)", "WARN");
      else stop("stop command");
      return;
    case "say":
      log(`[Server] ${args.join(" ")}`);
      return;
    case "list":
      log(`There are ${players.size} of a max of ${maxPlayers} players online: ${[...players.keys()].join(", ")}`);
      return;
    case "players":
      handlePlayers(args[0], args[1]);
      return;
    case "crash": {
      const code = args[0] === undefined ? 1 : Number(args[0]);
      const exitCode = Number.isInteger(code) && code >= 0 && code <= 255 ? code : 1;
      log(`Simulated crash, exiting with code ${exitCode}`, "ERROR");
      process.exit(exitCode);
      return;
    }
    case "oom":
      // The JVM prints this line; the kernel's OOM killer then ends the process with SIGKILL.
      log('Exception in thread "Server thread" java.lang.OutOfMemoryError: Java heap space', "ERROR");
      process.kill(process.pid, "SIGKILL");
      return;
    default:
      log(`Unknown command "${command}". Type "help" for help.`, "WARN");
  }
}

function handlePlayers(action, name) {
  if ((action !== "join" && action !== "leave") || !name || !/^[A-Za-z0-9_]{1,16}$/.test(name)) {
    log("Usage: players join <name> | players leave <name> (name: 1-16 of A-Z a-z 0-9 _)", "WARN");
    return;
  }
  if (action === "join") {
    if (players.has(name)) return log(`${name} is already online`, "WARN");
    if (players.size >= Math.min(maxPlayers, playersMax)) return log(`${name} cannot join: server full`, "WARN");
    const uuid = offlineUuid(name);
    players.set(name, uuid);
    log(`${name}[/127.0.0.1] logged in (uuid ${uuid})`);
    void postPlugin("player-join", { uuid, name, group }, playerReportAttemptsMax);
  } else {
    const uuid = players.get(name);
    if (uuid === undefined) return log(`${name} is not online`, "WARN");
    players.delete(name);
    log(`${name} left the game`);
    void postPlugin("player-leave", { uuid }, playerReportAttemptsMax);
  }
}

process.on("SIGTERM", () => (ignoreStop ? log("Ignoring SIGTERM (CLOUD_SIM_IGNORE_STOP)", "WARN") : stop("SIGTERM")));
process.on("SIGINT", () => (ignoreStop ? log("Ignoring SIGINT (CLOUD_SIM_IGNORE_STOP)", "WARN") : stop("SIGINT")));

// Standard input, split into lines (CRLF or LF). It closes when the daemon is gone: nothing can
// drive the server any more.
let pendingInput = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
  pendingInput += chunk;
  for (let end = pendingInput.indexOf("\n"); end >= 0; end = pendingInput.indexOf("\n")) {
    const line = pendingInput.slice(0, end);
    pendingInput = pendingInput.slice(end + 1);
    handleCommand(line.endsWith("\r") ? line.slice(0, -1) : line);
  }
});
process.stdin.on("end", () => {
  if (pendingInput !== "") handleCommand(pendingInput);
  pendingInput = "";
  stop("standard input closed");
});
process.stdin.on("error", () => stop("standard input closed"));

log(`Starting simulated game server ${VERSION} (instance ${instanceId}, group ${group || "-"}, node ${process.version})`);
// A template may carry this file to make every server started from it crash while booting (a bad
// plugin in a new revision, for the deployment tests).
if (require("node:fs").existsSync("simulated-crash-on-boot")) {
  log("Crashing on boot: simulated-crash-on-boot is present in the working directory", "ERROR");
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
        ticks += 1;
        log(`[tick] ${ticks} players=${players.size}`);
      }, tickIntervalMs);
    }
    if (controllerUrl !== null && workloadToken !== null) {
      void postPlugin("ready", {}, readyAttemptsMax).then((ok) =>
        log(ok ? "Reported ready to the controller" : "Could not report ready to the controller", ok ? "INFO" : "WARN"),
      );
    }
  });
}, startupDelayMs);

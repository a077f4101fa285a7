/**
 * The environment of the simulated game server: what every instance gets from the runner and the
 * knobs only the simulated server reads. Imported by the daemon (through contract.ts) and bundled
 * into the server itself, so it holds constants only.
 */

/** Environment every instance gets from the runner (all platforms). */
export const INSTANCE_ENV = {
  instanceId: "CLOUD_INSTANCE_ID",
  group: "CLOUD_GROUP",
  port: "CLOUD_PORT",
  memoryMb: "CLOUD_MEMORY_MB",
  controllerUrl: "CLOUD_CONTROLLER_URL",
  workloadToken: "CLOUD_WORKLOAD_TOKEN",
  /** The group's platform version (a catalog build's version); absent when none is named. */
  platformVersion: "CLOUD_PLATFORM_VERSION",
} as const;

/** Knobs only the simulated server reads (tests and benchmarks set them). */
export const SIMULATED_SERVER_ENV = {
  /** Address to bind; default 0.0.0.0. */
  bindHost: "CLOUD_SIM_BIND_HOST",
  /** Interval of the `[tick]` console line; default 5000, 0 disables it. */
  tickIntervalMs: "CLOUD_SIM_TICK_INTERVAL_MS",
  /** Delay before binding the port (a slow world load); default 0. */
  startupDelayMs: "CLOUD_SIM_STARTUP_DELAY_MS",
  /** Delay between `Stopping server` and exit 0; default 100. */
  stopDelayMs: "CLOUD_SIM_STOP_DELAY_MS",
  /** "true": ignore the `stop` command and SIGTERM (to test the kill escalation). */
  ignoreStop: "CLOUD_SIM_IGNORE_STOP",
  /** Maximum players reported by the status line; default 100. */
  maxPlayers: "CLOUD_SIM_MAX_PLAYERS",
  /** Attempts of the ready call; default 10. */
  readyAttempts: "CLOUD_SIM_READY_ATTEMPTS",
  /** `server` (default) or `proxy`: a proxy holds players and moves them when a transfer reaches it. */
  mode: "CLOUD_SIM_MODE",
  /** "true" / "false": open the plugin event stream (transfers to carry out, custom events); default true. */
  eventStream: "CLOUD_SIM_EVENT_STREAM",
  /** Host the simulated servers of the network are reached on (a proxy connects its players there); default 127.0.0.1. */
  backendHost: "CLOUD_SIM_BACKEND_HOST",
  /** Interval of the metrics report; default 0 (only the `metrics` command reports). */
  metricsIntervalMs: "CLOUD_SIM_METRICS_INTERVAL_MS",
} as const;

/** Console line printed when the simulated server is ready (log-line readiness matches `Done (`). */
export const SIMULATED_READY_LINE_PREFIX = "Done (";

/** A file of this name in the working directory (put there by a template) makes the server exit 3 while booting. */
export const SIMULATED_CRASH_ON_BOOT_FILE = "simulated-crash-on-boot";

/**
 * The daemon's composition root: builds the instance runner (built-in platforms, `workDir`), the
 * template cache (`dataDir/template-cache`, fetching from the current controller over HTTP), the
 * plugin relay (instances call the plugin API through it), the command handler, the reporter and
 * the gateway client, and wires them together. `cloud-daemon`
 * (main.ts) adds configuration loading, signals and exit statuses.
 */
import { instancesMemoryMb } from "./instance-memory.js";
import { readFileSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { systemClock, type Clock } from "../shared/clock.js";
import { createTracing } from "../shared/tracing.js";
import { createCommandHandler } from "./command-handler.js";
import type { DaemonConfig } from "./config.js";
import { ControllerEndpoint } from "./controller-endpoint.js";
import { GatewayClient, IDENTITY_FILES, type ClientLogger, type ClientState, type GatewayClientError } from "./gateway-client.js";
import { InstanceLogStore, recordRunnerEvent } from "./instance-logs.js";
import { InstanceReporter } from "./instance-reports.js";
import { InstanceRunner } from "./instance-runner.js";
import { PluginRelay } from "./plugin-relay.js";
import { callerCheckFor } from "./relay-callers.js";
import { builtInPlatforms, type PlatformDefinition } from "./platforms.js";
import { SpawnerLauncher, type ProcessLauncher } from "./process-launcher.js";
import { HttpTemplateSource, TemplateCache } from "./template-cache.js";
import { BuildCache, HttpBuildSource } from "./build-cache.js";
import { DaemonLogMirror, mirroredLogger } from "./log-mirror.js";

/** Directory of the template cache inside `dataDir`. */
export const TEMPLATE_CACHE_DIRECTORY = "template-cache";
/** Where instance logs are kept, under `dataDir`. */
export const INSTANCE_LOG_DIRECTORY = "instance-logs";
/** Under `dataDir`: the catalog builds this node holds (build-cache.ts). */
export const BUILD_CACHE_DIRECTORY = "build-cache";
/** Margin on top of the slowest platform's stop sequence before a shutdown kills what is left. */
export const shutdownMarginMs = 5_000;

export interface NodeDaemonOptions {
  config: DaemonConfig;
  daemonVersion: string;
  logger: ClientLogger;
  /** The built-in platforms by default. */
  platforms?: Map<string, PlatformDefinition>;
  clock?: Clock;
  /** How instance processes are started; default a {@link SpawnerLauncher} (closed at shutdown). */
  launcher?: ProcessLauncher;
  onStateChange?: (state: ClientState, detail: string) => void;
  /** The client gave up for good (refused join, incompatible protocol). */
  onFatal?: (error: GatewayClientError) => void;
}

/** A wired daemon; {@link NodeDaemon.start} joins (when needed) and connects. */
export interface NodeDaemon {
  client: GatewayClient;
  runner: InstanceRunner;
  cache: TemplateCache;
  reporter: InstanceReporter;
  endpoint: ControllerEndpoint;
  /** The loopback relay every instance's `CLOUD_CONTROLLER_URL` names; listening once `start()` ran. */
  relay: PluginRelay;
  /** The daemon's logger: writes through the configured one and mirrors every event to the controller. */
  logger: ClientLogger;
  /** The log appender that sends the daemon's records over the stream. */
  logMirror: DaemonLogMirror;
  /** How long {@link NodeDaemon.shutdown} lets instances stop before killing them. */
  shutdownTimeoutMs: number;
  /** Starts the plugin relay, then joins (when needed) and connects. */
  start(): Promise<void>;
  /**
   * Stops every instance with its platform's bounded sequence while the stream stays up (so the
   * controller receives the STOPPED reports), kills what is left after `shutdownTimeoutMs`, then
   * closes the plugin relay and the stream.
   */
  shutdown(): Promise<void>;
  /** Synchronous last resort for a process `exit` handler: SIGKILL to every instance. */
  killAllNow(): void;
}

/** The slowest stop sequence of `platforms` (stop command, then SIGTERM) plus {@link shutdownMarginMs}. */
export function shutdownTimeoutMsFor(platforms: ReadonlyMap<string, PlatformDefinition>): number {
  let slowestMs = 0;
  for (const platform of platforms.values()) slowestMs = Math.max(slowestMs, platform.stopTimeoutMs + platform.termTimeoutMs);
  return slowestMs + shutdownMarginMs;
}

/** Builds the daemon from its configuration; nothing connects before `start()`. */
export async function createNodeDaemon(options: NodeDaemonOptions): Promise<NodeDaemon> {
  const { config } = options;
  // Every log event also goes to the controller holding the stream (lowest priority, bounded).
  const mirror = new DaemonLogMirror({ send: (message) => client.send(message, { background: true }), ...(options.clock ? { clock: options.clock } : {}) });
  const logger = mirroredLogger(options.logger, mirror);
  await mkdir(config.workDir, { recursive: true });
  const endpoint = new ControllerEndpoint();
  const cache = await TemplateCache.open({
    directory: join(config.dataDir, TEMPLATE_CACHE_DIRECTORY),
    sizeBytesMax: config.templateCacheSizeMbMax * 1024 * 1024,
    source: new HttpTemplateSource({ baseUrl: () => endpoint.requireBaseUrl(), token: () => endpoint.requireToken() }),
  });
  // Catalog builds (server jars), fetched once per node with the same credential as the templates.
  const builds = await BuildCache.open(
    join(config.dataDir, BUILD_CACHE_DIRECTORY),
    new HttpBuildSource({ baseUrl: () => endpoint.requireBaseUrl(), token: () => endpoint.requireToken() }),
  );
  const platforms = options.platforms ?? builtInPlatforms();
  // The unpacker, the sink and the session hook refer to objects built after them; none of them
  // runs before start() connects.
  // Instance processes are spawned by a small helper process, so that the daemon's event loop is
  // not blocked by fork() (src/daemon/process-launcher.ts).
  const launcher = options.launcher ?? new SpawnerLauncher();
  const runner = new InstanceRunner({
    workDir: config.workDir,
    platforms,
    launcher,
    maxMemoryMb: config.maxMemoryMb,
    ...(options.clock ? { clock: options.clock } : {}),
    unpackTemplates: async (request) => {
      try {
        await cache.unpack(
          request.templates.map((layer) => ({ name: layer.name, version: layer.hash || undefined })),
          request.workDir,
          request.variables,
          request.signal,
        );
        if (request.build) await builds.install(request.build.sha256, request.workDir, request.build.fileName, request.signal);
      } finally {
        reporter.cacheChanged();
      }
    },
  });
  const reporter = new InstanceReporter({
    runner,
    sink: { send: (message, sendOptions) => client.send(message, sendOptions) },
    cacheStatus: () => cache.status(),
    ...(options.clock ? { clock: options.clock } : {}),
    onFinalReportsDropped: (count) => logger.warn(`Dropped ${count} instance reports kept while disconnected (queue full)`),
  });
  const { callerCheck, ...relayBounds } = config.pluginRelay;
  const relay = new PluginRelay({
    ...relayBounds,
    // A call is relayed only from the processes of the instance its token names.
    callers: await callerCheckFor(
      callerCheck,
      () => runner.list().map((instance) => ({ instanceId: instance.instanceId, pid: instance.pid })),
      (message) => logger.warn(message),
    ),
    ...(options.clock ? { clock: options.clock } : {}),
    logger,
  });
  // Every instance's output and the daemon's lines about it, kept after it ended (cloudctl logs).
  const instanceLogs = new InstanceLogStore(join(config.dataDir, INSTANCE_LOG_DIRECTORY), () => (options.clock ?? systemClock).nowMs());
  await instanceLogs.open();
  runner.subscribe((event) => recordRunnerEvent(instanceLogs, event));
  // Instances are given the relay, never a controller's address: it follows the stream's failover.
  const handler = createCommandHandler({ runner, controllerUrl: () => relay.url, instanceLogs });
  // The spans name the node: configured, or the id a join stored in the data directory (a first join learns it only later).
  const tracing = createTracing(config.telemetry, {
    name: "cloud-daemon",
    version: options.daemonVersion,
    instanceId: config.nodeId ?? config.hostname ?? storedNodeId(config.dataDir),
  });
  const client = new GatewayClient({
    controllers: config.controllers,
    token: config.token,
    nodeId: config.nodeId,
    hostname: config.hostname,
    dataDir: config.dataDir,
    maxMemoryMb: config.maxMemoryMb,
    usedMemoryMb: () => instancesMemoryMb(runner.list().map((instance) => instance.pid)),
    daemonVersion: options.daemonVersion,
    statusIntervalMs: config.statusIntervalMs,
    reconnectDelayMinMs: config.reconnectDelayMinMs,
    reconnectDelayMaxMs: config.reconnectDelayMaxMs,
    commandHandler: handler,
    tracing,
    logger,
    onStateChange: (state, detail) => {
      if (state !== "connected") relay.sessionClosed();
      options.onStateChange?.(state, detail);
    },
    onFatal: options.onFatal,
    onSessionOpen: ({ address, helloAck }) => {
      endpoint.sessionOpened(address, helloAck);
      relay.sessionOpened(endpoint.httpBaseUrl);
      reporter.sessionOpened();
      mirror.wake();
    },
    onApiCredential: (credential) => endpoint.credentialReceived(credential),
  });
  const shutdownTimeoutMs = shutdownTimeoutMsFor(platforms);
  let shuttingDown: Promise<void> | null = null;

  return {
    client: client,
    runner,
    cache,
    reporter: reporter,
    endpoint,
    relay,
    logger,
    logMirror: mirror,
    shutdownTimeoutMs,
    start: async () => {
      // Before the stream: no start command can come in before instances have somewhere to call.
      await relay.start();
      logger.info(`Plugin relay listening on ${relay.url}`);
      await client.start();
    },
    shutdown: () => {
      shuttingDown ??= (async () => {
        client.announceShutdown();
        let timer: NodeJS.Timeout | undefined;
        const stopped = await Promise.race([
          runner.shutdown("graceful").then(() => true),
          new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), shutdownTimeoutMs))),
        ]);
        clearTimeout(timer);
        if (!stopped) {
          logger.warn(`Instances still running after ${shutdownTimeoutMs} ms; killing them`);
          runner.killAllNow();
        }
        await relay.close();
        reporter.close();
        mirror.close();
        client.stop();
        await launcher.close();
        await instanceLogs.idle();
        // Spans of the last commands go out before the process ends.
        await tracing.shutdown().catch(() => undefined);
      })();
      return shuttingDown;
    },
    killAllNow: () => runner.killAllNow(),
  };
}

/** The node id a join stored in `dataDir` (read once at start), if any. */
function storedNodeId(dataDir: string): string | undefined {
  try {
    return readFileSync(join(dataDir, IDENTITY_FILES.nodeId), "utf8").trim() || undefined;
  } catch {
    return undefined;
  }
}

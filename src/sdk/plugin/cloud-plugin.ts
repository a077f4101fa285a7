/**
 * The entry point of a plugin: `connectToCloud()` reads the environment the daemon gives every
 * instance (`CLOUD_CONTROLLER_URL`, `CLOUD_WORKLOAD_TOKEN`, `CLOUD_INSTANCE_ID`, `CLOUD_GROUP`) and
 * wires the client, the players, the event bus, the event stream and the command registry. When the
 * event stream names a new player registry epoch, the players this instance holds are reported again.
 */
import { CloudClient, type WorkloadKind } from "./cloud-client.js";
import { CommandRegistry, type CommandRegistryOptions } from "./commands/registry.js";
import { PluginEventBus } from "./event-bus.js";
import { PluginEventStream, type EventStreamOptions } from "./event-stream.js";
import { MaintenanceState } from "./maintenance.js";
import { PlayerManager } from "./players.js";
import { PlayerRejoiner } from "./rejoin.js";
import { PluginTransfers } from "./transfers.js";
import { PluginTransport } from "./transport.js";
import { silentLogger, type SdkLogger } from "./types.js";

/** The variables every instance gets from its daemon. */
export const CLOUD_ENV = {
  controllerUrl: "CLOUD_CONTROLLER_URL",
  workloadToken: "CLOUD_WORKLOAD_TOKEN",
  instanceId: "CLOUD_INSTANCE_ID",
  group: "CLOUD_GROUP",
} as const;

export interface ConnectOptions {
  /** Defaults to `process.env`. */
  env?: Readonly<Record<string, string | undefined>>;
  controllerUrl?: string;
  token?: string;
  instanceId?: string;
  group?: string;
  /** "proxy" for a proxy plugin; default "server". */
  kind?: WorkloadKind;
  logger?: SdkLogger;
  requestTimeoutMs?: number;
  /** How long before the token's expiry it is renewed (default 5 minutes). */
  refreshAheadMs?: number;
  eventStream?: EventStreamOptions;
  commands?: CommandRegistryOptions;
}

/** Everything a plugin uses, wired. */
export interface CloudPlugin {
  readonly client: CloudClient;
  readonly players: PlayerManager;
  readonly events: PluginEventBus;
  readonly eventStream: PluginEventStream;
  /** Transfers this instance has to carry out, and outcomes, from the event stream. */
  readonly transfers: PluginTransfers;
  /** Reports the local players again when the controller lost its player registry. */
  readonly rejoiner: PlayerRejoiner;
  readonly commands: CommandRegistry;
  /** Maintenance of the network and of this group, kept current by the event stream. */
  readonly maintenance: MaintenanceState;
  readonly transport: PluginTransport;
  /** Closes the event stream (if it was started), the player view's subscriptions and the token renewal. */
  close(): Promise<void>;
}

/** True when the environment names a controller and a workload token. */
export function cloudEnvironmentPresent(env: Readonly<Record<string, string | undefined>> = process.env): boolean {
  return Boolean(env[CLOUD_ENV.controllerUrl] && env[CLOUD_ENV.workloadToken]);
}

/** Builds a CloudPlugin; throws when no controller URL or token is given or in the environment. */
export function connectToCloud(options: ConnectOptions = {}): CloudPlugin {
  const env = options.env ?? process.env;
  const controllerUrl = options.controllerUrl ?? env[CLOUD_ENV.controllerUrl];
  const token = options.token ?? env[CLOUD_ENV.workloadToken];
  if (!controllerUrl) throw new TypeError(`no controller URL: set ${CLOUD_ENV.controllerUrl} or pass controllerUrl`);
  if (!token) throw new TypeError(`no workload token: set ${CLOUD_ENV.workloadToken} or pass token`);
  const logger = options.logger ?? silentLogger;
  const transport = new PluginTransport({
    controllerUrl,
    token,
    logger,
    ...(options.requestTimeoutMs ? { requestTimeoutMs: options.requestTimeoutMs } : {}),
    ...(options.refreshAheadMs !== undefined ? { refreshAheadMs: options.refreshAheadMs } : {}),
  });
  const client = new CloudClient(transport, {
    instanceId: options.instanceId ?? env[CLOUD_ENV.instanceId] ?? "",
    group: options.group ?? env[CLOUD_ENV.group] ?? "",
    kind: options.kind ?? "server",
  });
  const events = new PluginEventBus(client, logger);
  const players = new PlayerManager(client);
  players.follow(events, (error) => logger.warn(`Reloading the players failed: ${error.message}`));
  const maintenance = new MaintenanceState(client, (error) => logger.warn(`Reloading maintenance failed: ${error.message}`));
  maintenance.follow(events);
  const transfers = new PluginTransfers(logger);
  const eventStream = new PluginEventStream(transport, events, { logger, ...options.eventStream }, transfers);
  const rejoiner = new PlayerRejoiner(client, players, logger);
  const stopRejoining = eventStream.onRegistryEpochChange(() => void rejoiner.rejoinAll());
  const commands = new CommandRegistry({
    lookups: {
      players,
      groups: async () => (await client.fetchGroups()).map((group) => group.name),
      instances: async () => (await client.fetchInstances()).map((instance) => instance.id),
    },
    ...options.commands,
  });
  return {
    client,
    players,
    events,
    eventStream,
    transfers,
    rejoiner,
    commands,
    maintenance,
    transport,
    close: async () => {
      stopRejoining();
      players.unfollow();
      maintenance.unfollow();
      transport.close();
      await eventStream.stop();
    },
  };
}

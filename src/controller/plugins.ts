/**
 * The plugin API wing: the player registry (its counts written through the scheduler), the group
 * aggregates, the deliveries to plugins, player transfers and the transfers out of draining
 * instances, and the guard of the plugins' report sequences.
 */
import type { ControllerEventBus } from "../events/bus.js";
import type { ControllerLogService } from "../logs/logger.js";
import type { MetricsService } from "../metrics/metrics.js";
import { DrainTransfers } from "../plugin-api/drain-transfers.js";
import { GroupAggregatesPublisher } from "../plugin-api/group-aggregates.js";
import { PluginDeliveries } from "../plugin-api/plugin-deliveries.js";
import { PlayerService } from "../plugin-api/players.js";
import { SequenceGuard } from "../plugin-api/sequence-guard.js";
import { TransferService } from "../plugin-api/transfers.js";
import type { SchedulerHost } from "../scheduler/scheduler-host.js";
import { FINISHED_STATES } from "../domain/instances/instance-schemas.js";
import type { Clock } from "../shared/clock.js";
import type { KvStore } from "../store/ports.js";
import type { Domain, PlayersRef } from "./domain.js";
import type { Cleanups } from "./lifecycle.js";

export interface PluginsOptions {
  kv: KvStore;
  events: ControllerEventBus;
  metrics: MetricsService;
  clock: Clock;
  logs: ControllerLogService;
  domain: Pick<Domain, "instances" | "groups">;
  scheduler: SchedulerHost;
  /** Set here once the registry exists. */
  players: PlayersRef;
  cleanups: Cleanups;
}

export interface Plugins {
  players: PlayerService;
  aggregates: GroupAggregatesPublisher;
  deliveries: PluginDeliveries;
  transfers: TransferService;
  drainTransfers: DrainTransfers;
  sequences: SequenceGuard;
  /** Starts the player registry. */
  startPlayers(): Promise<void>;
  /** Starts the transfers, the drain transfers and the aggregates. */
  start(): void;
}

/** Builds the plugin API services and starts the deliveries. */
export async function buildPlugins(options: PluginsOptions): Promise<Plugins> {
  const { kv, events, clock, logs, scheduler, cleanups } = options;
  const { instances, groups } = options.domain;
  const aggregates = new GroupAggregatesPublisher(instances, events, clock, logs.logger("cloud.players"));
  scheduler.onPlayerCountWritten((_id, group) => aggregates.groupChanged(group));
  const players = new PlayerService(
    kv,
    events,
    clock,
    // The group's owner writes the count to the record and marks the aggregates (onPlayerCountWritten above).
    (id, count) => scheduler.playerCountChanged(id, count),
    logs.logger("cloud.players"),
  );
  options.players.current = players;
  const deliveries = new PluginDeliveries(kv, logs.logger("cloud.plugin"));
  await deliveries.start();
  cleanups.push({ name: "plugin deliveries", run: () => deliveries.stop() });
  const isLiveInstance = async (id: string) => {
    const doc = await instances.getDoc(id);
    return doc !== null && !FINISHED_STATES.has(doc.state);
  };
  const transfers = new TransferService({
    kv,
    players,
    deliveries,
    instances: { isLive: isLiveInstance },
    events,
    clock,
    logger: logs.logger("cloud.transfers"),
  });
  const drainTransfers = new DrainTransfers({
    events,
    players,
    transfers,
    instances,
    groups,
    logger: logs.logger("cloud.transfers"),
    // A leave through another controller emptied an instance draining here: the actor hears it.
    emptied: (id) => scheduler.playerCountChanged(id, 0),
    clock,
  });
  const sequences = new SequenceGuard(kv);
  options.metrics.setGaugeSources({ workflowsPendingTransfers: () => transfers.pendingCount() });

  return {
    players,
    aggregates,
    deliveries,
    transfers,
    drainTransfers,
    sequences,
    startPlayers: async () => {
      await players.start();
      cleanups.push({ name: "players", run: () => players.stop() });
    },
    start: () => {
      transfers.start();
      cleanups.push({ name: "transfers", run: () => transfers.stop() });
      drainTransfers.start();
      scheduler.onDrainingAdopted((instanceId, group) => drainTransfers.adopt(instanceId, group));
      cleanups.push({ name: "drain transfers", run: () => drainTransfers.stop() });
      aggregates.start();
      cleanups.push({ name: "group aggregates", run: () => aggregates.stop() });
    },
  };
}

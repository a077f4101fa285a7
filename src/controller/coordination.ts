/**
 * How scheduling is coordinated, by profile. Development: one controller owns every group, daemons
 * talk to it alone. Production: per-group key-value leases decide which controller schedules a
 * group; daemon sessions are recorded in the key-value store, commands are forwarded to the
 * controller holding a daemon's stream over the cluster's gRPC, daemon reports and the bridged
 * events reach every controller through the key-value store's pub/sub.
 */
import type { ClusterService } from "../cluster/cluster-service.js";
import type { ControllerConfig } from "../config/schema.js";
import { DaemonRelay } from "../coordination/daemon-relay.js";
import { EventBridge } from "../coordination/event-bridge.js";
import type { FencingHighWater } from "../coordination/fencing-high-water.js";
import { KvLeases } from "../coordination/kv-leases.js";
import { NodeSessionRegistry } from "../coordination/session-registry.js";
import { EventTypes } from "../events/event-types.js";
import type { EventBus, Subscription } from "../events/types.js";
import type { DaemonGateway } from "../gateway/daemon-gateway.js";
import type { Logger } from "../logs/types.js";
import type { MetricsService } from "../metrics/metrics.js";
import type { Clock } from "../shared/clock.js";
import type { DaemonLink } from "../scheduler/scheduler-host.js";
import { LeaseScopeOwnership, type ScopePresence } from "../scheduler/lease-scopes.js";
import { LocalScopeOwnership, type ScopeOwnership } from "../scheduler/scopes.js";
import type { KvStore } from "../store/ports.js";

/** What the scheduler is built on. */
export interface SchedulingCoordination {
  scopes: ScopeOwnership;
  daemons: DaemonLink;
  /** Whether any controller holds a daemon session of the node now: a node that has one is never lost. */
  sessionHeld(nodeId: string): Promise<boolean>;
  /** Starts the relays (before the scheduler starts). */
  start(): Promise<void>;
  stop(): Promise<void>;
}

export interface CoordinationOptions {
  config: ControllerConfig;
  controllerId: string;
  /** The cluster membership: the other controllers' gRPC ports and this one's member certificate. */
  cluster: Pick<ClusterService, "memberCommandLink">;
  kv: KvStore;
  /** The durable record of granted lease tokens (the shared document database). */
  fencingHighWater: FencingHighWater;
  gateway: DaemonGateway;
  events: EventBus;
  metrics: MetricsService;
  clock: Clock;
  logger: Logger;
  /** This controller's presence entry (production): groups are spread over the live controllers. */
  presence?: ScopePresence | null;
}

/** Whether an event was published by this controller (not bridged from a peer). */
const isLocal = (source: string) => !source.startsWith("peer:");

/** The coordination of `config.runtime.profile`. */
export function buildCoordination(options: CoordinationOptions): SchedulingCoordination {
  const { config, gateway } = options;
  if (config.runtime.profile !== "production") {
    return {
      scopes: new LocalScopeOwnership(),
      daemons: gateway,
      sessionHeld: async (nodeId) => gateway.isConnected(nodeId),
      start: async () => undefined,
      stop: async () => undefined,
    };
  }
  const { kv, controllerId, events, logger } = options;
  const leaseTtlMs = 2 * config.scheduler.evaluationIntervalSeconds * 1000;
  const leases = new KvLeases({ kv, controllerId, leaseTtlMs, metrics: options.metrics, highWater: options.fencingHighWater });
  const scopes = new LeaseScopeOwnership({ leases, leaseTtlMs, clock: options.clock, logger, presence: options.presence ?? undefined });
  const registry = new NodeSessionRegistry({ kv });
  const relay = new DaemonRelay({ controllerId, kv, registry, gateway, peers: options.cluster.memberCommandLink(), logger, clock: options.clock });
  const bridge = new EventBridge({ kv, bus: events, controllerId, logger });
  const subscriptions: Subscription[] = [];
  return {
    scopes,
    daemons: relay,
    sessionHeld: (nodeId) => relay.sessionHeld(nodeId),
    start: async () => {
      await relay.start();
      await bridge.start();
      subscriptions.push(
        events.subscribe(EventTypes.NODE_CONNECTED, async (e) => {
          if (isLocal(e.source) && typeof e.data.sessionEpoch === "number")
            await relay.sessionOpened(String(e.data.nodeId), String(e.data.sessionId), e.data.sessionEpoch);
        }),
        events.subscribe(EventTypes.NODE_DISCONNECTED, async (e) => {
          if (!isLocal(e.source)) return;
          const nodeId = String(e.data.nodeId);
          const session = await registry.lookup(nodeId);
          if (session?.controllerId === controllerId && !gateway.isConnected(nodeId)) await relay.sessionClosed(nodeId, session.sessionId);
        }),
      );
    },
    stop: async () => {
      for (const s of subscriptions) s.unsubscribe();
      await bridge.stop();
      await relay.stop();
    },
  };
}

/**
 * Built-in event types of spec document 3 ("Built-in event types and fields") with their payloads.
 * Timestamps in payloads are ISO-8601 UTC strings; `timestampMs` is epoch milliseconds. The payloads
 * a plugin receives, INSTANCE_METRICS's and the custom type pattern are the plugin SDK's contracts
 * (`src/sdk/contracts/`), declared there once and re-exported here for the controller's rooms.
 */
import { CUSTOM_EVENT_TYPE_PATTERN } from "../sdk/contracts/plugin-events.js";
import type {
  GroupMaintenanceChangedPayload,
  MaintenanceUpdatedPayload,
  PlayerJourneyPayload,
  PlayerPayload,
  PlayerTransferPayload,
  PluginEventPayloads,
} from "../sdk/contracts/plugin-events.js";
import type { InstanceMetricsPayload, WorldMetrics } from "../sdk/contracts/plugin-metrics.js";
import type { AssertNever } from "../sdk/contracts/type-checks.js";

export { CUSTOM_EVENT_TYPE_PATTERN };
export type {
  GroupMaintenanceChangedPayload,
  InstanceMetricsPayload,
  MaintenanceUpdatedPayload,
  PlayerJourneyPayload,
  PlayerPayload,
  PlayerTransferPayload,
  WorldMetrics,
};

/** Instance states of spec document 1. */
export type InstanceState = "SCHEDULED" | "PREPARING" | "STARTING" | "RUNNING" | "DRAINING" | "STOPPING" | "STOPPED" | "CRASHED";

export const EventTypes = {
  NODE_CONNECTED: "NODE_CONNECTED",
  NODE_DISCONNECTED: "NODE_DISCONNECTED",
  NODE_STATUS: "NODE_STATUS",
  NODE_HEARTBEAT_STALE: "NODE_HEARTBEAT_STALE",
  NODE_HEARTBEAT_RESUMED: "NODE_HEARTBEAT_RESUMED",
  NODE_DRAIN_REQUESTED: "NODE_DRAIN_REQUESTED",
  NODE_DRAIN_COMPLETED: "NODE_DRAIN_COMPLETED",
  NODE_CACHE_STATUS: "NODE_CACHE_STATUS",
  INSTANCE_STATE_CHANGED: "INSTANCE_STATE_CHANGED",
  INSTANCE_CRASHED: "INSTANCE_CRASHED",
  INSTANCE_DRAINING: "INSTANCE_DRAINING",
  INSTANCE_CONSOLE_OUTPUT: "INSTANCE_CONSOLE_OUTPUT",
  INSTANCE_METRICS: "INSTANCE_METRICS",
  GROUP_CREATED: "GROUP_CREATED",
  GROUP_UPDATED: "GROUP_UPDATED",
  GROUP_DELETED: "GROUP_DELETED",
  GROUP_AGGREGATES_UPDATED: "GROUP_AGGREGATES_UPDATED",
  GROUP_MAINTENANCE_CHANGED: "GROUP_MAINTENANCE_CHANGED",
  GROUP_CRASH_LOOP: "GROUP_CRASH_LOOP",
  DEPLOYMENT_CREATED: "DEPLOYMENT_CREATED",
  DEPLOYMENT_COMPLETED: "DEPLOYMENT_COMPLETED",
  PLAYER_CONNECTED: "PLAYER_CONNECTED",
  PLAYER_DISCONNECTED: "PLAYER_DISCONNECTED",
  PLAYER_TRANSFER: "PLAYER_TRANSFER",
  PLAYER_JOURNEY: "PLAYER_JOURNEY",
  TEMPLATE_UPDATED: "TEMPLATE_UPDATED",
  MAINTENANCE_UPDATED: "MAINTENANCE_UPDATED",
  MODULE_LOADED: "MODULE_LOADED",
  MODULE_UNLOADED: "MODULE_UNLOADED",
  MODULE_FRONTEND_RELOADED: "MODULE_FRONTEND_RELOADED",
  CAPABILITY_REGISTERED: "CAPABILITY_REGISTERED",
  CAPABILITY_UNREGISTERED: "CAPABILITY_UNREGISTERED",
  CAPABILITY_PROVIDER_CHANGED: "CAPABILITY_PROVIDER_CHANGED",
  CLUSTER_CONFIG_CHANGED: "CLUSTER_CONFIG_CHANGED",
  CHOREOGRAPHY_OVERLAY_ACTIVATED: "CHOREOGRAPHY_OVERLAY_ACTIVATED",
  CHOREOGRAPHY_OVERLAY_DEACTIVATED: "CHOREOGRAPHY_OVERLAY_DEACTIVATED",
} as const;

export type BuiltInEventType = (typeof EventTypes)[keyof typeof EventTypes];

/** Every built-in type; any other type string is a custom (MODULE:ACTION) event. */
export const BUILT_IN_EVENT_TYPES: ReadonlySet<string> = new Set<string>(Object.values(EventTypes));

export const isBuiltInEventType = (type: string): type is BuiltInEventType => BUILT_IN_EVENT_TYPES.has(type);

/** Events the SSE stream never forwards (spec document 3, "Delivery paths"). */
export const SSE_EXCLUDED_EVENT_TYPES: ReadonlySet<string> = new Set([EventTypes.INSTANCE_CONSOLE_OUTPUT]);

/** Events a key-value bridge republishes to peer controllers (spec document 3, "Delivery paths"). */
export const BRIDGED_EVENT_TYPES: ReadonlySet<string> = new Set([
  EventTypes.NODE_CONNECTED,
  EventTypes.NODE_DISCONNECTED,
  EventTypes.NODE_STATUS,
  EventTypes.INSTANCE_STATE_CHANGED,
  EventTypes.PLAYER_CONNECTED,
  EventTypes.PLAYER_DISCONNECTED,
  EventTypes.GROUP_CREATED,
  EventTypes.GROUP_UPDATED,
  EventTypes.GROUP_DELETED,
]);

// Payloads are type aliases (not interfaces) so they stay assignable to Record<string, unknown>.

/** `sessionEpoch` (additive): the node's session number, one more per session opened anywhere; absent when its record could not be written. */
export type NodeConnectedPayload = { nodeId: string; sessionId: string; timestamp: string; sessionEpoch?: number };
/** `sessionId` and `sessionEpoch` (additive): the session that ended; published only when it was the node's newest. */
export type NodeDisconnectedPayload = { nodeId: string; reason: string; timestamp: string; sessionId?: string; sessionEpoch?: number };
export type NodeStatusPayload = { nodeId: string; cpuUsage: number; usedMemoryMb: number; totalMemoryMb: number; lastHeartbeatAt: string };
export type NodeHeartbeatStalePayload = { nodeId: string; missedPongs: number; lastHeartbeatAt: string };
export type NodeHeartbeatResumedPayload = { nodeId: string; lastHeartbeatAt: string };
export type NodeDrainRequestedPayload = {
  nodeId: string;
  shutdownAfterDrain: boolean;
  drainTimeoutSeconds: number;
  kickMessage: string | null;
  timestamp: string;
};
export type NodeDrainCompletedPayload = { nodeId: string; timestamp: string };
export type NodeCacheStatusPayload = { nodeId: string; totalSizeBytes: number; timestamp: string };
export type InstanceStateChangedPayload = { instanceId: string; group: string; nodeId: string | null; oldState: InstanceState | null; newState: InstanceState };
export type InstanceCrashedPayload = {
  instanceId: string;
  group: string;
  nodeId: string | null;
  exitCode: number | null;
  classification: string;
  logTail: string[];
  uptimeMs: number;
};
export type InstanceDrainingPayload = { instanceId: string; group: string; nodeId: string | null };
export type InstanceConsoleOutputPayload = { instanceId: string; line: string; timestampMs: number };
export type GroupChangedPayload = { groupName: string };
export type GroupAggregatesUpdatedPayload = { groupName: string; runningInstances: number; totalPlayers: number };
export type GroupCrashLoopPayload = { group: string; crashCount: number; windowStart: string };
export type DeploymentCreatedPayload = { groupName: string; revision: number; strategy: string };
export type DeploymentCompletedPayload = { groupName: string; revision: number; outcome: string };
export type TemplateUpdatedPayload = { templateName: string; oldHash: string | null; newHash: string };
export type ModuleLoadedPayload = { moduleName: string; hasFrontend: boolean };
export type ModuleUnloadedPayload = { moduleName: string };
export type ModuleFrontendReloadedPayload = { moduleName: string; contentHash: string };
export type CapabilityRegisteredPayload = { capabilityId: string; version: string; moduleId: string };
export type CapabilityUnregisteredPayload = { capabilityId: string; moduleId: string };
export type CapabilityProviderChangedPayload = { capabilityId: string; moduleId: string; fromVersion: string | null; toVersion: string | null };
export type ClusterConfigChangedPayload = { version: number; parentVersion: number | null; mutator: string; action: string };
export type ChoreographyOverlayActivatedPayload = { eventName: string; group: string; activeUntil: string };
export type ChoreographyOverlayDeactivatedPayload = { eventName: string; group: string; reason: string };

/** Payload type of every built-in event type. */
export interface EventPayloads {
  NODE_CONNECTED: NodeConnectedPayload;
  NODE_DISCONNECTED: NodeDisconnectedPayload;
  NODE_STATUS: NodeStatusPayload;
  NODE_HEARTBEAT_STALE: NodeHeartbeatStalePayload;
  NODE_HEARTBEAT_RESUMED: NodeHeartbeatResumedPayload;
  NODE_DRAIN_REQUESTED: NodeDrainRequestedPayload;
  NODE_DRAIN_COMPLETED: NodeDrainCompletedPayload;
  NODE_CACHE_STATUS: NodeCacheStatusPayload;
  INSTANCE_STATE_CHANGED: InstanceStateChangedPayload;
  INSTANCE_CRASHED: InstanceCrashedPayload;
  INSTANCE_DRAINING: InstanceDrainingPayload;
  INSTANCE_CONSOLE_OUTPUT: InstanceConsoleOutputPayload;
  INSTANCE_METRICS: InstanceMetricsPayload;
  GROUP_CREATED: GroupChangedPayload;
  GROUP_UPDATED: GroupChangedPayload;
  GROUP_DELETED: GroupChangedPayload;
  GROUP_AGGREGATES_UPDATED: GroupAggregatesUpdatedPayload;
  GROUP_MAINTENANCE_CHANGED: GroupMaintenanceChangedPayload;
  GROUP_CRASH_LOOP: GroupCrashLoopPayload;
  DEPLOYMENT_CREATED: DeploymentCreatedPayload;
  DEPLOYMENT_COMPLETED: DeploymentCompletedPayload;
  PLAYER_CONNECTED: PlayerPayload;
  PLAYER_DISCONNECTED: PlayerPayload;
  PLAYER_TRANSFER: PlayerTransferPayload;
  PLAYER_JOURNEY: PlayerJourneyPayload;
  TEMPLATE_UPDATED: TemplateUpdatedPayload;
  MAINTENANCE_UPDATED: MaintenanceUpdatedPayload;
  MODULE_LOADED: ModuleLoadedPayload;
  MODULE_UNLOADED: ModuleUnloadedPayload;
  MODULE_FRONTEND_RELOADED: ModuleFrontendReloadedPayload;
  CAPABILITY_REGISTERED: CapabilityRegisteredPayload;
  CAPABILITY_UNREGISTERED: CapabilityUnregisteredPayload;
  CAPABILITY_PROVIDER_CHANGED: CapabilityProviderChangedPayload;
  CLUSTER_CONFIG_CHANGED: ClusterConfigChangedPayload;
  CHOREOGRAPHY_OVERLAY_ACTIVATED: ChoreographyOverlayActivatedPayload;
  CHOREOGRAPHY_OVERLAY_DEACTIVATED: ChoreographyOverlayDeactivatedPayload;
}

/** Compile-time only: every event a plugin receives is a built-in type with the very payload the bus carries. */
export type PluginPayloadsAreTheBusPayloads = AssertNever<
  {
    [K in keyof PluginEventPayloads]: EventPayloads[K] extends PluginEventPayloads[K] ? (PluginEventPayloads[K] extends EventPayloads[K] ? never : K) : K;
  }[keyof PluginEventPayloads]
>;

/** Field names of every built-in type, as listed in the spec (used by tests and the SSE schema). */
export const EVENT_FIELDS: { readonly [K in BuiltInEventType]: readonly (keyof EventPayloads[K])[] } = {
  NODE_CONNECTED: ["nodeId", "sessionId", "timestamp"],
  NODE_DISCONNECTED: ["nodeId", "reason", "timestamp"],
  NODE_STATUS: ["nodeId", "cpuUsage", "usedMemoryMb", "totalMemoryMb", "lastHeartbeatAt"],
  NODE_HEARTBEAT_STALE: ["nodeId", "missedPongs", "lastHeartbeatAt"],
  NODE_HEARTBEAT_RESUMED: ["nodeId", "lastHeartbeatAt"],
  NODE_DRAIN_REQUESTED: ["nodeId", "shutdownAfterDrain", "drainTimeoutSeconds", "kickMessage", "timestamp"],
  NODE_DRAIN_COMPLETED: ["nodeId", "timestamp"],
  NODE_CACHE_STATUS: ["nodeId", "totalSizeBytes", "timestamp"],
  INSTANCE_STATE_CHANGED: ["instanceId", "group", "nodeId", "oldState", "newState"],
  INSTANCE_CRASHED: ["instanceId", "group", "nodeId", "exitCode", "classification", "logTail", "uptimeMs"],
  INSTANCE_DRAINING: ["instanceId", "group", "nodeId"],
  INSTANCE_CONSOLE_OUTPUT: ["instanceId", "line", "timestampMs"],
  INSTANCE_METRICS: [
    "instanceId",
    "group",
    "tps1m",
    "tps5m",
    "tps15m",
    "msptAvg",
    "heapUsedMb",
    "heapMaxMb",
    "gcCollections",
    "gcTimeMs",
    "threadCount",
    "playerCount",
    "maxPlayers",
    "worldCount",
    "totalEntities",
    "totalChunks",
    "worlds",
    "serverVersion",
    "pluginCount",
  ],
  GROUP_CREATED: ["groupName"],
  GROUP_UPDATED: ["groupName"],
  GROUP_DELETED: ["groupName"],
  GROUP_AGGREGATES_UPDATED: ["groupName", "runningInstances", "totalPlayers"],
  GROUP_MAINTENANCE_CHANGED: ["groupName", "maintenance", "message"],
  GROUP_CRASH_LOOP: ["group", "crashCount", "windowStart"],
  DEPLOYMENT_CREATED: ["groupName", "revision", "strategy"],
  DEPLOYMENT_COMPLETED: ["groupName", "revision", "outcome"],
  PLAYER_CONNECTED: ["uuid", "name", "instanceId", "group"],
  PLAYER_DISCONNECTED: ["uuid", "name", "instanceId", "group"],
  PLAYER_TRANSFER: ["uuid", "name", "fromInstanceId", "toInstanceId"],
  PLAYER_JOURNEY: ["entry"],
  TEMPLATE_UPDATED: ["templateName", "oldHash", "newHash"],
  MAINTENANCE_UPDATED: ["globalEnabled", "message"],
  MODULE_LOADED: ["moduleName", "hasFrontend"],
  MODULE_UNLOADED: ["moduleName"],
  MODULE_FRONTEND_RELOADED: ["moduleName", "contentHash"],
  CAPABILITY_REGISTERED: ["capabilityId", "version", "moduleId"],
  CAPABILITY_UNREGISTERED: ["capabilityId", "moduleId"],
  CAPABILITY_PROVIDER_CHANGED: ["capabilityId", "moduleId", "fromVersion", "toVersion"],
  CLUSTER_CONFIG_CHANGED: ["version", "parentVersion", "mutator", "action"],
  CHOREOGRAPHY_OVERLAY_ACTIVATED: ["eventName", "group", "activeUntil"],
  CHOREOGRAPHY_OVERLAY_DEACTIVATED: ["eventName", "group", "reason"],
};

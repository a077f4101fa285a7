/**
 * The TypeScript plugin SDK (`cloud-control-plane/sdk`): what a Node-based server, proxy or tool
 * builds against to talk to the control plane through the plugin API (spec document 3). It imports
 * nothing from the rest of the package.
 */
export { connectToCloud, cloudEnvironmentPresent, CLOUD_ENV, type CloudPlugin, type ConnectOptions } from "./plugin/cloud-plugin.js";
export { CloudClient, CUSTOM_EVENT_TYPE_PATTERN, ADMISSION_REFUSALS, type CloudClientIdentity, type WorkloadKind } from "./plugin/cloud-client.js";
export { MaintenanceState, MAINTENANCE_EVENT_TYPES, type MaintenanceListener } from "./plugin/maintenance.js";
export { TransferResult } from "./plugin/transfer-result.js";
export {
  PluginTransfers,
  TRANSFER_FRAME_EVENTS,
  resultOf,
  transferOutcomeWaitMsDefault,
  type TransferFrameEvent,
  type TransferHandler,
  type TransferOutcomeHandler,
} from "./plugin/transfers.js";
export { PlayerManager, CloudPlayer, type LocalPlayer, type PlayerConnections } from "./plugin/players.js";
export { PlayerRejoiner, rejoinsInFlightMax } from "./plugin/rejoin.js";
export { PluginEventBus, PLAYER_EVENT_TYPES, RESYNC_REQUIRED, type EventHandler, type EventFilterBuilder, type Subscription } from "./plugin/event-bus.js";
export {
  PluginEventStream,
  SseParser,
  EVENT_STREAM_PATH,
  REGISTRY_EPOCH_FRAME,
  type EventStreamOptions,
  type RegistryEpochListener,
  type SseFrame,
} from "./plugin/event-stream.js";
export {
  PluginTransport,
  newTraceparent,
  pluginRequestTimeoutMs,
  sequencedInFlightMax,
  tokenExpiryOf,
  tokenRefreshAheadMs,
  type TransportOptions,
} from "./plugin/transport.js";
export { CloudApiError, InvalidArgumentError } from "./plugin/errors.js";
export type {
  CloudEvent,
  GroupInfo,
  InstanceInfo,
  MetricsPayload,
  PlayerAdmissionResult,
  PlayerMessage,
  PlayerPermissions,
  PlayerView,
  PluginMaintenance,
  SdkLogger,
  Transfer,
  TransferState,
  WorldMetrics,
} from "./plugin/types.js";
export type {
  GroupMaintenanceChangedPayload,
  MaintenanceUpdatedPayload,
  PlayerJourneyPayload,
  PlayerPayload,
  PlayerTransferPayload,
  PluginEventPayloads,
  PluginEventType,
} from "./contracts/plugin-events.js";
export { Arguments, CommandArgument, type ArgumentCompleter, type ArgumentContext, type ArgumentParser } from "./plugin/commands/arguments.js";
export { CommandBuilder, helpPageSizeDefault, type CommandContext, type CommandHandler, type CommandNode } from "./plugin/commands/builder.js";
export {
  CommandRegistry,
  NO_PERMISSION_MESSAGE,
  ONLY_CONSOLE_MESSAGE,
  ONLY_PLAYERS_MESSAGE,
  type CommandRegistryOptions,
  type DispatchOutcome,
  type ProgrammaticCommand,
} from "./plugin/commands/registry.js";
export { CommandFailure, RED, fail, failIf, failUnless, require, stripFormatting } from "./plugin/commands/failure.js";
export { consoleSender, linkedPlayerSender, playerSender, type CloudCommandSender, type SendingPlayer } from "./plugin/commands/sender.js";

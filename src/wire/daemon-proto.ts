/**
 * The daemon wire contract (`proto/daemon.proto`) loaded at runtime with @grpc/proto-loader, and
 * TypeScript shapes of its messages as proto-loader decodes them (keepCase, longs as numbers,
 * defaults filled, the oneof case named in `payload`). Shared by the controller gateway and the
 * daemon's gateway client.
 */
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

/** Absolute path of `proto/daemon.proto`. */
export const daemonProtoPath = fileURLToPath(new URL("../../proto/daemon.proto", import.meta.url));

/** The protocol version this build speaks (spec document 2, Versioning). */
export const DAEMON_PROTOCOL_VERSION = 1;

/** Largest gRPC message either side accepts or sends. */
export const daemonGrpcMessageBytesMax = 16 * 1024 * 1024;

export interface JoinRequest {
  token: string;
  node_id: string;
  hostname: string;
  daemon_version: string;
  total_memory_mb: number;
  csr_public_key_pem: string;
}

export interface JoinResponse {
  node_id: string;
  certificate_pem: string;
  ca_certificate_pem: string;
  private_key_pem: string;
}

export interface Hello {
  protocol_version: number;
  daemon_version: string;
  node_id: string;
  total_memory_mb: number;
  used_memory_mb: number;
  hostname: string;
}
export interface Ping {
  sequence: number;
  sent_at_ms: number;
}
export interface Pong {
  sequence: number;
  sent_at_ms: number;
}
export interface NodeStatusReport {
  cpu_usage: number;
  used_memory_mb: number;
  total_memory_mb: number;
  /** True in the report a daemon sends when its graceful shutdown begins. */
  shutting_down?: boolean;
}
export interface InstanceStateReport {
  instance_id: string;
  group: string;
  state: string;
  fencing_token: number;
  port: number;
  pid: number;
  exit_code: number;
  message: string;
  timestamp_ms: number;
}
export interface ConsoleLine {
  instance_id: string;
  stream: string;
  line: string;
  timestamp_ms: number;
  sequence: number;
}
export interface CrashReportMessage {
  instance_id: string;
  group: string;
  exit_code: number;
  signal: string;
  classification: string;
  last_lines: string[];
  uptime_ms: number;
  fencing_token: number;
  timestamp_ms: number;
}
export interface LogRecordMessage {
  level: string;
  logger: string;
  message: string;
  timestamp_ms: number;
  seq: number;
  thread: string;
  throwable: string;
  mdc: Record<string, string>;
  dropped_before: number;
}
export interface CommandResult {
  command_id: string;
  ok: boolean;
  error_code: string;
  message: string;
  /** The answer to list_instances: live instances, then recently finished ones; absent (or empty) otherwise. */
  instances?: InstanceStateReport[];
  /** The answer to read_instance_log: the log's last lines, oldest first; absent (or empty) otherwise. */
  log_lines?: ConsoleLine[];
}
export interface Inventory {
  instances: InstanceStateReport[];
}
export interface CacheStatus {
  total_size_bytes: number;
  entry_count: number;
}

/** Payload cases of DaemonMessage and their message types. */
export interface DaemonPayloads {
  hello: Hello;
  ping: Ping;
  pong: Pong;
  node_status: NodeStatusReport;
  instance_state: InstanceStateReport;
  console_line: ConsoleLine;
  crash_report: CrashReportMessage;
  log_record: LogRecordMessage;
  command_result: CommandResult;
  inventory: Inventory;
  cache_status: CacheStatus;
}
/** A daemon -> controller message: exactly one payload case set, named by `payload`. */
export type DaemonMessage = { [K in keyof DaemonPayloads]: { payload?: K } & { [P in K]: DaemonPayloads[K] } }[keyof DaemonPayloads];

/** A daemon message the gateway does not handle itself (instance state, console, crash, log), with the session it came on. */
export type DaemonReport = { nodeId: string; sessionId: string; message: DaemonMessage };

export interface ApiCredential {
  token: string;
  expires_at_ms: number;
}
export interface HelloAck {
  protocol_version: number;
  protocol_compatible: boolean;
  session_id: string;
  heartbeat_interval_ms: number;
  /** Null when the controller sends none (an older controller). */
  api_credential: ApiCredential | null;
  http_port: number;
}
export interface TemplateLayerRef {
  name: string;
  hash: string;
}

/** What a daemon needs to run one instance. */
export interface InstanceSpec {
  instance_id: string;
  group: string;
  platform: string;
  port: number;
  memory_mb: number;
  static: boolean;
  environment: Record<string, string>;
  template_hashes: string[];
  workload_token: string;
  controller_url: string;
  variables: Record<string, string>;
  templates: TemplateLayerRef[];
  jar_file: string;
  /** Empty: none. */
  platform_version?: string;
  /** The catalog build to place at `jar_file`; empty: none. */
  build_sha256?: string;
}
/** Fields every instance command carries. */
export interface CommandHeader {
  command_id: string;
  group: string;
  fencing_token: number;
}
export interface PrepareInstance extends CommandHeader {
  spec: InstanceSpec;
}
export interface StartInstance extends CommandHeader {
  spec: InstanceSpec;
}
export interface StopInstance extends CommandHeader {
  instance_id: string;
}
export interface ForceStopInstance extends CommandHeader {
  instance_id: string;
}
export interface StdinInstance extends CommandHeader {
  instance_id: string;
  line: string;
}
export interface MarkInstanceReady extends CommandHeader {
  instance_id: string;
}
/** Asks for what runs on the node; group and fencing_token are not on the wire (empty, 0). */
export interface ListInstances {
  command_id: string;
}
/** Asks for the last lines of an instance's log; group and fencing_token are not on the wire (empty, 0). */
export interface ReadInstanceLog {
  command_id: string;
  instance_id: string;
  tail_lines: number;
}
export interface ModuleEvent {
  module: string;
  event_type: string;
  payload_json: string;
}

/** Instance command cases of ControllerMessage. */
export interface CommandPayloads {
  prepare_instance: PrepareInstance;
  start_instance: StartInstance;
  stop_instance: StopInstance;
  force_stop_instance: ForceStopInstance;
  stdin_instance: StdinInstance;
  mark_instance_ready: MarkInstanceReady;
  list_instances: ListInstances;
  read_instance_log: ReadInstanceLog;
}
/** Payload cases of ControllerMessage and their message types. */
export interface ControllerPayloads extends CommandPayloads {
  hello_ack: HelloAck;
  ping: Ping;
  pong: Pong;
  module_event: ModuleEvent;
  api_credential: ApiCredential;
}
/** A controller -> daemon message; `traceparent` (W3C, empty when untraced) rides along with instance commands. */
export type ControllerMessage = {
  [K in keyof ControllerPayloads]: { payload?: K; traceparent?: string } & { [P in K]: ControllerPayloads[K] };
}[keyof ControllerPayloads];

/**
 * An instance command without its command id (the gateway assigns it). `traceparent` is the trace
 * context it is sent under (W3C; absent or empty when untraced), carried to the daemon.
 */
export type InstanceCommand = {
  [K in keyof CommandPayloads]: { type: K; body: Omit<CommandPayloads[K], "command_id">; traceparent?: string };
}[keyof CommandPayloads];

/** Builds a ControllerMessage for one payload case. */
export function controllerMessage<K extends keyof ControllerPayloads>(kind: K, body: ControllerPayloads[K]): ControllerMessage {
  return { payload: kind, [kind]: body } as unknown as ControllerMessage;
}

/** Builds a DaemonMessage for one payload case. */
export function daemonMessage<K extends keyof DaemonPayloads>(kind: K, body: DaemonPayloads[K]): DaemonMessage {
  return { payload: kind, [kind]: body } as unknown as DaemonMessage;
}

/** The payload case of a decoded message (proto-loader's `oneofs: true` names it in `payload`). */
export function payloadCase<T extends { payload?: string }>(message: T): string {
  return message.payload ?? "unknown";
}

/** The NodeGateway service definition and client constructor. */
export function loadNodeGateway(): grpc.ServiceClientConstructor {
  const definition = protoLoader.loadSync(daemonProtoPath, { keepCase: true, longs: Number, enums: String, defaults: true, arrays: true, oneofs: true });
  const loaded = grpc.loadPackageDefinition(definition) as unknown as { cloud: { daemon: { v1: { NodeGateway: grpc.ServiceClientConstructor } } } };
  return loaded.cloud.daemon.v1.NodeGateway;
}

/** Error message of the handshake refusal for an unsupported protocol version. */
export function unsupportedProtocolMessage(version: number): string {
  return `Unsupported daemon protocol version: ${version}`;
}

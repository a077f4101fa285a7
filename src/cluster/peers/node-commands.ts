/**
 * Daemon commands between members (`ForwardNodeCommand`). A daemon keeps one stream to one
 * controller; a command for it that arises on another controller goes to the holder's gRPC port,
 * found in the holder's member record, under this controller's member certificate, and the answer
 * is the daemon's result. Every failure on the way is a result too, with a stable code:
 *
 * | code | when |
 * |---|---|
 * | `PEER_UNKNOWN` | no member record here gives the holder's gRPC address |
 * | `PEER_UNREACHABLE` | the holder's gRPC port cannot be reached |
 * | `COMMAND_TIMEOUT` | no answer before the deadline |
 * | `RELAY_STOPPED` | this controller is stopping |
 * | the holder's code | its gateway's (`NODE_NOT_CONNECTED` when the stream moved away, ...) or a refusal of the call (`NOT_A_MEMBER`, `INVALID_ARGUMENT`) |
 * | `FORWARD_FAILED` | anything else |
 */
import * as grpc from "@grpc/grpc-js";
import { NODE_ID_PATTERN } from "../../domain/node-tokens/node-token-schemas.js";
import type { CommandPayloads, CommandResult, InstanceCommand } from "../../wire/daemon-proto.js";
import { ApiError, assert } from "../../shared/errors.js";
import { fromGrpcError, type ForwardNodeCommandRequest } from "./cluster-proto.js";
import type { MemberClients } from "./member-clients.js";

/** Runs a command on a daemon whose stream this controller holds; resolves with a result, never rejects. */
export type NodeCommandHandler = (nodeId: string, command: InstanceCommand) => Promise<CommandResult>;

/** Bounds of one forwarded command. */
export interface ForwardOptions {
  /** Deadline of the call, the holder's own wait for its daemon included. */
  timeoutMs: number;
  /** Aborted when this controller stops: the call is cancelled. */
  signal: AbortSignal;
}

/** The cases of `ForwardNodeCommandRequest.command` (`proto/cluster.proto`). */
const commandCases: ReadonlySet<string> = new Set<keyof CommandPayloads>([
  "prepare_instance",
  "start_instance",
  "stop_instance",
  "force_stop_instance",
  "stdin_instance",
  "mark_instance_ready",
  "list_instances",
  "read_instance_log",
]);

const nodeIdPattern = new RegExp(NODE_ID_PATTERN);

export const commandFailure = (code: string, message: string): CommandResult => ({ command_id: "", ok: false, error_code: code, message });

/** The request carrying `command` for `nodeId`; the command id is left to the holder's gateway. */
export function forwardNodeCommandRequest(nodeId: string, command: InstanceCommand): ForwardNodeCommandRequest {
  return {
    node_id: nodeId,
    command: command.type,
    [command.type]: { ...command.body, command_id: "" },
    traceparent: command.traceparent ?? "",
  } as ForwardNodeCommandRequest;
}

/** The node and command a request carries; INVALID_ARGUMENT without a command or with a bad node id. */
export function readForwardNodeCommand(request: ForwardNodeCommandRequest): { nodeId: string; command: InstanceCommand } {
  if (!nodeIdPattern.test(request.node_id)) throw new ApiError(400, "INVALID_ARGUMENT", `node_id must match ${nodeIdPattern.source}`);
  const type = request.command;
  if (type === undefined || !commandCases.has(type)) throw new ApiError(400, "INVALID_ARGUMENT", "The request carries no instance command");
  const { command_id: _assignedByTheHolder, ...body } = (request as Record<string, unknown>)[type] as CommandPayloads[typeof type];
  const traceparent = typeof request.traceparent === "string" && request.traceparent !== "" ? { traceparent: request.traceparent } : {};
  return { nodeId: request.node_id, command: { type, body, ...traceparent } as InstanceCommand };
}

/**
 * Where the `ForwardNodeCommand` calls of other members are handed: the daemons whose streams this
 * controller holds, once scheduling coordination serves them. Until then (and on a profile that
 * forwards nothing) every call answers NODE_NOT_CONNECTED.
 */
export class ForwardedCommands {
  private handler: NodeCommandHandler | null = null;

  /** Serves forwarded commands with `handler`; returns the function that stops serving. */
  serve(handler: NodeCommandHandler): () => void {
    assert(this.handler === null, "forwarded node commands already have a handler");
    this.handler = handler;
    return () => {
      if (this.handler === handler) this.handler = null;
    };
  }

  run(nodeId: string, command: InstanceCommand): Promise<CommandResult> {
    if (!this.handler)
      return Promise.resolve(commandFailure("NODE_NOT_CONNECTED", `This controller holds no daemon streams for other controllers (node ${nodeId})`));
    return this.handler(nodeId, command);
  }
}

/**
 * This controller's side of forwarding: sends commands to the member holding a daemon's stream and
 * serves the other members' through {@link ForwardedCommands}. Owns its clients (one per member
 * address, with their own channels) and closes them in {@link close}.
 */
export class MemberCommandLink {
  constructor(
    private readonly clients: MemberClients,
    /** The gRPC address of a member, or null when not known. */
    private readonly grpcAddressOf: (memberId: string) => string | null,
    private readonly served: ForwardedCommands,
  ) {}

  /** Sends `command` for `nodeId` to the member `controllerId`; resolves with a result, never rejects. */
  async forward(controllerId: string, nodeId: string, command: InstanceCommand, options: ForwardOptions): Promise<CommandResult> {
    const address = this.grpcAddressOf(controllerId);
    if (!address)
      return commandFailure("PEER_UNKNOWN", `Controller ${controllerId} holds the stream of node ${nodeId} but no member record here gives its gRPC address`);
    if (options.signal.aborted) return stopped();
    try {
      const response = await this.clients.forwardNodeCommand(address, forwardNodeCommandRequest(nodeId, command), options);
      return response.result ?? commandFailure("FORWARD_FAILED", `Controller ${controllerId} answered no result for node ${nodeId}`);
    } catch (err) {
      if (options.signal.aborted) return stopped();
      return callFailure(err, controllerId, nodeId, options.timeoutMs);
    }
  }

  serve(handler: NodeCommandHandler): () => void {
    return this.served.serve(handler);
  }

  close(): void {
    this.clients.close();
  }
}

const stopped = () => commandFailure("RELAY_STOPPED", "The controller is stopping");

function callFailure(err: unknown, controllerId: string, nodeId: string, timeoutMs: number): CommandResult {
  const error = err as Partial<grpc.ServiceError>;
  if (typeof error.code !== "number")
    return commandFailure("FORWARD_FAILED", `Forwarding a command for node ${nodeId} to controller ${controllerId} failed: ${String(err)}`);
  const expected = fromGrpcError(error as grpc.ServiceError);
  if (expected) return commandFailure(expected.code, `Controller ${controllerId}: ${expected.message}`);
  switch (error.code) {
    case grpc.status.DEADLINE_EXCEEDED:
      return commandFailure("COMMAND_TIMEOUT", `Controller ${controllerId} did not answer a command for node ${nodeId} within ${timeoutMs} ms`);
    case grpc.status.UNAVAILABLE:
      return commandFailure("PEER_UNREACHABLE", `Controller ${controllerId} cannot be reached for node ${nodeId}: ${error.details ?? ""}`);
    default:
      return commandFailure("FORWARD_FAILED", `Controller ${controllerId} failed a command for node ${nodeId}: ${error.details ?? String(err)}`);
  }
}

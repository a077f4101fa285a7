/**
 * One daemon's stream on the controller: outbound sends bounded by the stream's buffer, the
 * heartbeat timer, and the commands awaiting results. The gateway owns the registry of sessions;
 * a session reports its messages and its end through the callbacks it is given.
 */
import { randomUUID } from "node:crypto";
import * as grpc from "@grpc/grpc-js";
import { EventTypes, type NodeHeartbeatResumedPayload, type NodeHeartbeatStalePayload } from "../events/event-types.js";
import type { EventBus } from "../events/types.js";
import type { Logger } from "../logs/types.js";
import type { MetricsService } from "../metrics/metrics.js";
import type { Clock, Timer } from "../shared/clock.js";
import {
  controllerMessage,
  payloadCase,
  type CommandResult,
  type ControllerMessage,
  type DaemonMessage,
  type Hello,
  type InstanceCommand,
} from "../wire/daemon-proto.js";
import type { ConnectCall, GatewayTuning, SessionInfo } from "./gateway-types.js";
import { HeartbeatMonitor } from "./heartbeat-monitor.js";
import { PendingCommands } from "./pending-commands.js";

/** The services a session reports through. */
export interface DaemonSessionServices {
  events: EventBus;
  metrics: MetricsService;
  clock: Clock;
  logger: Logger;
}

/** Where a session hands what it does not handle itself. */
export interface DaemonSessionCallbacks {
  /** A daemon message other than ping and pong. */
  onMessage(session: DaemonSession, message: DaemonMessage): void;
  /** The session ended (once); `markUnreachable` when the node's record should say so. */
  onClosed(session: DaemonSession, reason: string, markUnreachable: boolean): void;
}

/** How {@link DaemonSession.close} ends the stream. */
export interface SessionCloseOptions {
  /** A non-OK status ends the call with that status; otherwise the stream is ended cleanly. */
  status?: grpc.status;
  markUnreachable?: boolean;
}

/**
 * A live daemon stream after its hello was accepted. Every message from the daemon counts as a
 * sign of life; pings are answered here and the controller's own pings go out every
 * `heartbeatIntervalMs` once {@link startHeartbeats} is called (stale and resumed are published as
 * NODE_HEARTBEAT_STALE / NODE_HEARTBEAT_RESUMED, too many unanswered end the session). Closing is
 * idempotent and fails the commands still waiting.
 */
export class DaemonSession {
  readonly id = randomUUID();
  closed = false;
  private readonly connectedAtIso: string;
  private readonly commands: PendingCommands;
  private readonly heartbeats: HeartbeatMonitor;
  private heartbeatTimer: Timer | null = null;

  constructor(
    readonly nodeId: string,
    private readonly call: ConnectCall,
    private readonly hello: Hello,
    private readonly tuning: GatewayTuning,
    private readonly services: DaemonSessionServices,
    private readonly callbacks: DaemonSessionCallbacks,
  ) {
    const connectedAtMs = services.clock.nowMs();
    this.connectedAtIso = new Date(connectedAtMs).toISOString();
    this.heartbeats = new HeartbeatMonitor(tuning, connectedAtMs);
    this.commands = new PendingCommands(nodeId, tuning.pendingCommandsMax, services.clock);
    call.on("data", (message: DaemonMessage) => this.receive(message));
    call.on("end", () => this.close("daemon closed the stream", { status: grpc.status.OK, markUnreachable: true }));
    call.on("error", (err: Error) => this.close(`stream error: ${err.message}`, { markUnreachable: true }));
    call.on("cancelled", () => this.close("stream cancelled", { markUnreachable: true }));
    call.on("close", () => this.close("stream closed", { markUnreachable: true }));
  }

  info(): SessionInfo {
    return {
      nodeId: this.nodeId,
      sessionId: this.id,
      connectedAt: this.connectedAtIso,
      daemonVersion: this.hello.daemon_version,
      stale: this.heartbeats.stale,
      missedPongs: this.heartbeats.missedPongs,
    };
  }

  startHeartbeats(): void {
    this.heartbeatTimer = this.services.clock.setInterval(() => this.heartbeat(), this.tuning.heartbeatIntervalMs, { unref: true });
  }

  /** Writes a message unless the outbound buffer is full; true when queued. */
  send(message: ControllerMessage): boolean {
    const kind = payloadCase(message);
    if (this.closed || this.call.writableLength >= this.tuning.outboundQueueMessagesMax) {
      this.services.metrics.grpcDaemonMessagesOut.inc({ payload_case: kind, outcome: "dropped" });
      return false;
    }
    this.call.write(message);
    this.services.metrics.grpcDaemonMessagesOut.inc({ payload_case: kind, outcome: "delivered" });
    return true;
  }

  /** Sends `command` under a fresh command id; see {@link PendingCommands.dispatch} for how it settles. */
  sendCommand(command: InstanceCommand, timeoutMs: number): Promise<CommandResult> {
    return this.commands.dispatch(command.type, timeoutMs, (commandId) =>
      this.send({ ...controllerMessage(command.type, { ...command.body, command_id: commandId } as never), traceparent: command.traceparent ?? "" }),
    );
  }

  resolveCommand(result: CommandResult): void {
    this.commands.resolve(result);
  }

  close(reason: string, opts: SessionCloseOptions = {}): void {
    if (this.closed) return;
    this.closed = true;
    this.heartbeatTimer?.cancel();
    this.commands.rejectAll(reason);
    try {
      if (opts.status !== undefined && opts.status !== grpc.status.OK) {
        this.call.emit("error", { code: opts.status, details: reason });
      } else {
        this.call.end();
      }
    } catch {
      // The stream is already gone.
    }
    this.callbacks.onClosed(this, reason, opts.markUnreachable ?? false);
  }

  private receive(message: DaemonMessage): void {
    if (this.closed) return;
    this.services.metrics.grpcDaemonMessagesIn.inc({ payload_case: payloadCase(message) });
    // Any message is a sign of life: a busy daemon whose pongs queue behind its reports is alive.
    this.heartbeatAnswered();
    switch (message.payload) {
      case "pong":
        return;
      case "ping":
        this.send(controllerMessage("pong", { sequence: message.ping.sequence, sent_at_ms: this.services.clock.nowMs() }));
        return;
      default:
        this.callbacks.onMessage(this, message);
    }
  }

  private heartbeat(): void {
    if (this.closed) return;
    const tick = this.heartbeats.tick();
    if (tick.kind === "disconnect") {
      this.close(`heartbeat timeout (${tick.missedPongs} pings unanswered)`, { status: grpc.status.UNAVAILABLE, markUnreachable: true });
      return;
    }
    if (tick.becameStale) {
      this.services.logger.warn(`Node ${this.nodeId} heartbeat stale: ${tick.becameStale.missedPongs} pings unanswered`);
      this.services.events.publish(EventTypes.NODE_HEARTBEAT_STALE, {
        nodeId: this.nodeId,
        missedPongs: tick.becameStale.missedPongs,
        lastHeartbeatAt: new Date(tick.becameStale.lastHeartbeatAtMs).toISOString(),
      } satisfies NodeHeartbeatStalePayload);
    }
    this.send(controllerMessage("ping", { sequence: tick.sequence, sent_at_ms: this.services.clock.nowMs() }));
  }

  private heartbeatAnswered(): void {
    if (!this.heartbeats.answered(this.services.clock.nowMs())) return;
    this.services.logger.info(`Node ${this.nodeId} heartbeat resumed`);
    this.services.events.publish(EventTypes.NODE_HEARTBEAT_RESUMED, {
      nodeId: this.nodeId,
      lastHeartbeatAt: new Date(this.heartbeats.lastHeartbeatAtMs).toISOString(),
    } satisfies NodeHeartbeatResumedPayload);
  }
}

/**
 * Daemons across controllers. A daemon keeps one stream to one controller, while the instances on
 * it belong to the groups whose leases any controller may hold. This link makes the daemon
 * gateways of every controller look like one:
 *
 * - **Sessions**: every controller records the streams it holds in the node-session registry of the
 *   key-value store (renewed while connected).
 * - **Commands**: a command for a node whose stream another controller holds is forwarded to that
 *   controller through the key-value store's pub/sub (`cloud:v1:node-commands:<controllerId>`); its
 *   gateway sends it and the result comes back on `cloud:v1:node-command-results:<controllerId>`.
 * - **Reports**: every daemon report a controller receives (instance states, crashes, inventories,
 *   console lines) is republished on `cloud:v1:daemon-reports`; the others hand them to their
 *   scheduler, which acts on the instances it supervises and ignores the rest.
 *
 * Without a peer (one controller) everything stays local.
 */
import { randomUUID } from "node:crypto";
import type { CommandResult, InstanceCommand } from "../gateway/daemon-proto.js";
import type { DaemonReport } from "../gateway/daemon-gateway.js";
import type { Logger } from "../logs/types.js";
import type { KvStore } from "../store/ports.js";
import { KV_KEY_PREFIX } from "./keys.js";
import type { NodeSessionRegistry } from "./session-registry.js";

/** The channel every controller publishes its daemons' reports on. */
export const DAEMON_REPORTS_CHANNEL = `${KV_KEY_PREFIX}daemon-reports`;
/** Commands for the daemons whose streams `controllerId` holds. */
export const nodeCommandsChannel = (controllerId: string) => `${KV_KEY_PREFIX}node-commands:${controllerId}`;
/** Results of the commands `controllerId` forwarded. */
export const nodeCommandResultsChannel = (controllerId: string) => `${KV_KEY_PREFIX}node-command-results:${controllerId}`;

/** How long a forwarded command may take, the holder's own command timeout included. */
export const forwardedCommandTimeoutMs = 35_000;
/** Forwarded commands awaiting a result at once; beyond this new ones fail with QUEUE_FULL. */
export const forwardedCommandsPendingMax = 4_096;
/** How often the sessions this controller holds are renewed in the registry. */
export const sessionRenewIntervalMs = 10_000;

/** The gateway as the link needs it. */
export interface LocalGateway {
  isConnected(nodeId: string): boolean;
  listSessions(): { nodeId: string; sessionId: string }[];
  sendCommand(nodeId: string, command: InstanceCommand): Promise<CommandResult>;
  onReport(handler: (report: DaemonReport) => void): () => void;
}

export interface DaemonRelayOptions {
  controllerId: string;
  kv: KvStore;
  registry: NodeSessionRegistry;
  gateway: LocalGateway;
  logger: Logger;
}

interface ForwardRequest {
  requestId: string;
  from: string;
  nodeId: string;
  command: InstanceCommand;
}

interface ForwardResponse {
  requestId: string;
  result: CommandResult;
}

interface RelayedReport {
  origin: string;
  report: DaemonReport;
}

const failure = (code: string, message: string): CommandResult => ({ command_id: "", ok: false, error_code: code, message });

/** Commands and reports of every daemon, whichever controller holds its stream. */
export class DaemonRelay {
  private readonly pending = new Map<string, { resolve: (result: CommandResult) => void; timer: NodeJS.Timeout }>();
  private readonly handlers = new Set<(report: DaemonReport) => void>();
  private readonly cleanups: (() => Promise<void> | void)[] = [];
  private renewTimer: NodeJS.Timeout | null = null;

  constructor(private readonly options: DaemonRelayOptions) {}

  async start(): Promise<void> {
    const { kv, controllerId, gateway } = this.options;
    this.cleanups.push(
      await kv.subscribe(nodeCommandsChannel(controllerId), (message) => void this.serveForwarded(message)),
      await kv.subscribe(nodeCommandResultsChannel(controllerId), (message) => this.forwardedResult(message)),
      await kv.subscribe(DAEMON_REPORTS_CHANNEL, (message) => this.peerReport(message)),
    );
    this.cleanups.push(
      gateway.onReport((report) => {
        this.deliver(report);
        void kv.publish(DAEMON_REPORTS_CHANNEL, JSON.stringify({ origin: controllerId, report } satisfies RelayedReport)).catch((err: unknown) => this.options.logger.warn("Relaying a daemon report failed", err));
      }),
    );
    this.renewTimer = setInterval(() => void this.renewSessions(), sessionRenewIntervalMs);
    this.renewTimer.unref();
  }

  async stop(): Promise<void> {
    if (this.renewTimer) clearInterval(this.renewTimer);
    for (const cleanup of this.cleanups.splice(0).reverse()) await cleanup();
    for (const [id, pending] of this.pending) {
      clearTimeout(pending.timer);
      pending.resolve(failure("RELAY_STOPPED", "The controller is stopping"));
      this.pending.delete(id);
    }
  }

  /** Records (or clears) a stream this controller holds. */
  async sessionOpened(nodeId: string, sessionId: string): Promise<void> {
    await this.options.registry.register(nodeId, this.options.controllerId, sessionId);
  }

  async sessionClosed(nodeId: string, sessionId: string): Promise<void> {
    await this.options.registry.unregister(nodeId, sessionId);
  }

  /** Receives every daemon report of every controller (this one's first-hand, the others' relayed). */
  onReport(handler: (report: DaemonReport) => void): () => void {
    this.handlers.add(handler);
    return () => this.handlers.delete(handler);
  }

  /** Sends a command to a node's daemon through whichever controller holds its stream. */
  async sendCommand(nodeId: string, command: InstanceCommand): Promise<CommandResult> {
    const { gateway, registry, controllerId, kv } = this.options;
    if (gateway.isConnected(nodeId)) return gateway.sendCommand(nodeId, command);
    const session = await registry.lookup(nodeId);
    if (!session || session.controllerId === controllerId) return failure("NODE_NOT_CONNECTED", `Node ${nodeId} is not connected to any controller`);
    if (this.pending.size >= forwardedCommandsPendingMax) return failure("QUEUE_FULL", "Too many forwarded commands awaiting results");
    const requestId = randomUUID();
    const result = new Promise<CommandResult>((resolve) => {
      const timer = setTimeout(() => {
        this.pending.delete(requestId);
        resolve(failure("COMMAND_TIMEOUT", `Controller ${session.controllerId} did not answer a command for node ${nodeId} within ${forwardedCommandTimeoutMs} ms`));
      }, forwardedCommandTimeoutMs);
      this.pending.set(requestId, { resolve, timer });
    });
    await kv.publish(nodeCommandsChannel(session.controllerId), JSON.stringify({ requestId, from: controllerId, nodeId, command } satisfies ForwardRequest));
    return result;
  }

  private deliver(report: DaemonReport): void {
    for (const handler of this.handlers) {
      try {
        handler(report);
      } catch (err) {
        this.options.logger.error("A daemon report handler failed", err);
      }
    }
  }

  private peerReport(message: string): void {
    let relayed: RelayedReport;
    try {
      relayed = JSON.parse(message) as RelayedReport;
    } catch {
      return;
    }
    if (relayed.origin === this.options.controllerId || !relayed.report?.message) return;
    this.deliver(relayed.report);
  }

  private async serveForwarded(message: string): Promise<void> {
    let request: ForwardRequest;
    try {
      request = JSON.parse(message) as ForwardRequest;
    } catch {
      return;
    }
    let result: CommandResult;
    try {
      result = this.options.gateway.isConnected(request.nodeId)
        ? await this.options.gateway.sendCommand(request.nodeId, request.command)
        : failure("NODE_NOT_CONNECTED", `Node ${request.nodeId} is no longer connected to controller ${this.options.controllerId}`);
    } catch (err) {
      result = failure((err as { code?: string }).code ?? "COMMAND_FAILED", (err as Error).message);
    }
    await this.options.kv.publish(nodeCommandResultsChannel(request.from), JSON.stringify({ requestId: request.requestId, result } satisfies ForwardResponse));
  }

  private forwardedResult(message: string): void {
    let response: ForwardResponse;
    try {
      response = JSON.parse(message) as ForwardResponse;
    } catch {
      return;
    }
    const pending = this.pending.get(response.requestId);
    if (!pending) return;
    this.pending.delete(response.requestId);
    clearTimeout(pending.timer);
    pending.resolve(response.result);
  }

  private async renewSessions(): Promise<void> {
    for (const session of this.options.gateway.listSessions()) {
      try {
        await this.options.registry.register(session.nodeId, this.options.controllerId, session.sessionId);
      } catch (err) {
        this.options.logger.warn(`Renewing the session of node ${session.nodeId} failed`, err);
      }
    }
  }
}

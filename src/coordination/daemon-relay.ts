/**
 * Daemons across controllers. A daemon keeps one stream to one controller, while the instances on
 * it belong to the groups whose leases any controller may hold. This link makes the daemon
 * gateways of every controller look like one:
 *
 * - **Sessions**: every controller records the streams it holds in the node-session registry of the
 *   key-value store (renewed while connected).
 * - **Commands**: a command for a node whose stream another controller holds is forwarded to that
 *   controller over controller-to-controller gRPC ({@link PeerCommandLink}, the cluster's
 *   `ForwardNodeCommand`); its gateway sends it and the daemon's result is the answer.
 * - **Reports**: every daemon report a controller receives (instance states, crashes, inventories,
 *   console lines) is republished on `cloud:v1:daemon-reports`; the others hand them to their
 *   scheduler, which acts on the instances it supervises and ignores the rest.
 *
 * Without a peer (one controller) everything stays local.
 */
import type { CommandResult, InstanceCommand } from "../wire/daemon-proto.js";
import type { DaemonReport } from "../wire/daemon-proto.js";
import type { Logger } from "../logs/types.js";
import type { KvStore } from "../store/ports.js";
import { KV_KEY_PREFIX } from "./keys.js";
import type { NodeSessionRegistry } from "./session-registry.js";
import { systemClock, type Clock, type Timer } from "../shared/clock.js";

/** The channel every controller publishes its daemons' reports on. */
export const DAEMON_REPORTS_CHANNEL = `${KV_KEY_PREFIX}daemon-reports`;

/** How long a forwarded command may take, the holder's own command timeout included. */
export const forwardedCommandTimeoutMs = 35_000;
/** Forwarded commands awaiting a result at once; beyond this new ones fail with QUEUE_FULL. */
export const forwardedCommandsPendingMax = 4_096;
/** How often the sessions this controller holds are renewed in the registry. */
export const sessionRenewIntervalMs = 10_000;

/** The gateway as the link needs it. */
export interface LocalGateway {
  isConnected(nodeId: string): boolean;
  listSessions(): { nodeId: string; sessionId: string; sessionEpoch?: number | null }[];
  sendCommand(nodeId: string, command: InstanceCommand): Promise<CommandResult>;
  onReport(handler: (report: DaemonReport) => void): () => void;
}

/**
 * How commands reach the controller holding a daemon's stream, and how this controller serves the
 * others' (`MemberCommandLink` of the cluster: gRPC with member certificates).
 */
export interface PeerCommandLink {
  /** Sends `command` for `nodeId` to the controller `controllerId`; resolves with a result, never rejects. */
  forward(controllerId: string, nodeId: string, command: InstanceCommand, options: { timeoutMs: number; signal: AbortSignal }): Promise<CommandResult>;
  /** Serves the commands other controllers forward here; returns the function that stops serving. */
  serve(handler: (nodeId: string, command: InstanceCommand) => Promise<CommandResult>): () => void;
  /** Closes the clients of the other controllers. */
  close(): void;
}

export interface DaemonRelayOptions {
  /** Times the session renewals; the system clock by default. */
  clock?: Clock;
  controllerId: string;
  kv: KvStore;
  registry: NodeSessionRegistry;
  gateway: LocalGateway;
  peers: PeerCommandLink;
  logger: Logger;
  /** Deadline of a forwarded command; {@link forwardedCommandTimeoutMs} unless set. */
  forwardedCommandTimeoutMs?: number;
}

interface RelayedReport {
  origin: string;
  report: DaemonReport;
}

const failure = (code: string, message: string): CommandResult => ({ command_id: "", ok: false, error_code: code, message });

/** Commands and reports of every daemon, whichever controller holds its stream. */
export class DaemonRelay {
  private readonly stopping = new AbortController();
  private forwardsInFlight = 0;
  private readonly handlers = new Set<(report: DaemonReport) => void>();
  private readonly cleanups: (() => Promise<void> | void)[] = [];
  private renewTimer: Timer | null = null;

  constructor(private readonly options: DaemonRelayOptions) {}

  async start(): Promise<void> {
    const { kv, controllerId, gateway, peers } = this.options;
    this.cleanups.push(peers.serve((nodeId, command) => this.serveForwarded(nodeId, command)));
    this.cleanups.push(await kv.subscribe(DAEMON_REPORTS_CHANNEL, (message) => this.peerReport(message)));
    this.cleanups.push(
      gateway.onReport((report) => {
        this.deliver(report);
        void kv
          .publish(DAEMON_REPORTS_CHANNEL, JSON.stringify({ origin: controllerId, report } satisfies RelayedReport))
          .catch((err: unknown) => this.options.logger.warn("Relaying a daemon report failed", err));
      }),
    );
    this.renewTimer = (this.options.clock ?? systemClock).setInterval(() => void this.renewSessions(), sessionRenewIntervalMs, { unref: true });
  }

  async stop(): Promise<void> {
    this.renewTimer?.cancel();
    // Forwarded commands still on their way are cancelled and answer RELAY_STOPPED.
    this.stopping.abort();
    for (const cleanup of this.cleanups.splice(0).reverse()) await cleanup();
    this.options.peers.close();
  }

  /** Records (or clears) a stream this controller holds. */
  async sessionOpened(nodeId: string, sessionId: string, epoch: number): Promise<void> {
    await this.options.registry.register(nodeId, this.options.controllerId, sessionId, epoch);
  }

  /** Whether any controller holds a session of the node now (this one, or one the registry names). */
  async sessionHeld(nodeId: string): Promise<boolean> {
    if (this.options.gateway.isConnected(nodeId)) return true;
    return (await this.options.registry.lookup(nodeId)) !== null;
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
    const { gateway, registry, controllerId, peers } = this.options;
    if (gateway.isConnected(nodeId)) return gateway.sendCommand(nodeId, command);
    if (this.stopping.signal.aborted) return failure("RELAY_STOPPED", "The controller is stopping");
    const session = await registry.lookup(nodeId);
    if (!session || session.controllerId === controllerId) return failure("NODE_NOT_CONNECTED", `Node ${nodeId} is not connected to any controller`);
    if (this.forwardsInFlight >= forwardedCommandsPendingMax) return failure("QUEUE_FULL", "Too many forwarded commands awaiting results");
    this.forwardsInFlight++;
    try {
      const timeoutMs = this.options.forwardedCommandTimeoutMs ?? forwardedCommandTimeoutMs;
      return await peers.forward(session.controllerId, nodeId, command, { timeoutMs, signal: this.stopping.signal });
    } finally {
      this.forwardsInFlight--;
    }
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
      // Not a relayed report (every controller publishes JSON): nothing to deliver.
      return;
    }
    if (relayed.origin === this.options.controllerId || !relayed.report?.message) return;
    this.deliver(relayed.report);
  }

  /** A command another controller forwarded for a daemon whose stream this one holds. */
  private async serveForwarded(nodeId: string, command: InstanceCommand): Promise<CommandResult> {
    const { gateway, controllerId } = this.options;
    if (!gateway.isConnected(nodeId)) return failure("NODE_NOT_CONNECTED", `Node ${nodeId} is no longer connected to controller ${controllerId}`);
    try {
      return await gateway.sendCommand(nodeId, command);
    } catch (err) {
      return failure((err as { code?: string }).code ?? "COMMAND_FAILED", (err as Error).message);
    }
  }

  private async renewSessions(): Promise<void> {
    for (const session of this.options.gateway.listSessions()) {
      // A session whose opening is not recorded yet is registered by its NODE_CONNECTED.
      if (session.sessionEpoch === null || session.sessionEpoch === undefined) continue;
      try {
        await this.options.registry.register(session.nodeId, this.options.controllerId, session.sessionId, session.sessionEpoch);
      } catch (err) {
        this.options.logger.warn(`Renewing the session of node ${session.nodeId} failed`, err);
      }
    }
  }
}

/**
 * Raft peer traffic over gRPC with mutual TLS (`proto/raft.proto`, loaded at runtime by
 * @grpc/proto-loader; there is no code generation step). Each peer gets one long-lived client
 * stream, so messages to a peer stay in order; messages are batched per stream write. Every peer
 * has a bounded outbound queue: when it is full the message is dropped and the peer reported
 * unreachable, which makes the Raft core fall back to probing. A broken stream is re-opened after
 * a bounded exponential back-off.
 *
 * A leader's commit notice (an empty append that only moves a follower's commit index) waits up to
 * 2 ms and is dropped when a later append to the same peer, which carries the commit index as
 * well, is queued meanwhile: under load a follower learns the index from the next append, without a
 * message and an answer of its own (four of the ten messages a leader handles per sequential put).
 * Raft tolerates a lost message; a follower applies at most 2 ms later than it would otherwise.
 *
 * Both ends present certificates of the cluster CA; the server requires a client certificate and
 * checks that its common name is the envelope's sender, the client checks that the server's common
 * name is the peer it meant to reach.
 */
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import type { Message, NodeId } from "../../../raft/types.js";
import { nextTurn } from "../../shared/clock.js";

export const raftProtoPath = fileURLToPath(new URL("../../../proto/raft.proto", import.meta.url));

/** Encodes and decodes Raft messages (the library's encodeMessage/decodeMessage). */
export interface MessageCodec {
  encode(message: Message): Uint8Array;
  decode(bytes: Uint8Array): Message;
}

/** Where inbound messages and delivery outcomes go: the node host. */
export interface TransportHandler {
  receive(message: Message): void;
  reportUnreachable(peer: NodeId): void;
  reportSnapshot(peer: NodeId, ok: boolean): void;
}

/** PEM material for mutual TLS. */
export interface TransportTls {
  readonly caPem: string;
  readonly certPem: string;
  readonly keyPem: string;
}

export interface GrpcTransportOptions {
  readonly clusterId: string;
  readonly nodeId: NodeId;
  /** host:port to listen on; port 0 picks a free port (see {@link GrpcTransport.start}). */
  readonly listenAddress: string;
  /** Peer id → host:port. May be changed later with {@link GrpcTransport.setPeer}. */
  readonly peers: Readonly<Record<NodeId, string>>;
  readonly tls: TransportTls;
  readonly codec: MessageCodec;
  /** Messages waiting for one peer's stream; beyond this they are dropped. */
  readonly outboundQueueMessagesMax?: number;
  /** Messages carried by one envelope (one stream write). */
  readonly envelopeMessagesMax?: number;
  readonly reconnectDelayMinMs?: number;
  readonly reconnectDelayMaxMs?: number;
  /** Largest gRPC message accepted or sent (a snapshot travels in one message). */
  readonly grpcMessageBytesMax?: number;
}

interface RaftEnvelope {
  cluster_id: string;
  from: string;
  to: string;
  messages: Uint8Array[];
}

type SendClient = grpc.Client & {
  Send(callback: (error: grpc.ServiceError | null) => void): grpc.ClientWritableStream<RaftEnvelope>;
};

const outboundQueueMessagesDefault = 4096;
const commitNoticeHoldMs = 2;
const envelopeMessagesDefault = 256;
const reconnectDelayMinMsDefault = 20;
const reconnectDelayMaxMsDefault = 500;
const grpcMessageBytesDefault = 64 * 1024 * 1024;

function loadRaftService(): grpc.ServiceClientConstructor {
  const definition = protoLoader.loadSync(raftProtoPath, { keepCase: true, longs: Number, defaults: true, arrays: true });
  const loaded = grpc.loadPackageDefinition(definition) as unknown as { cloud: { raft: { RaftTransport: grpc.ServiceClientConstructor } } };
  return loaded.cloud.raft.RaftTransport;
}

/** The gRPC Raft transport of one node: a server for inbound streams and one link per peer. */
export class GrpcTransport {
  private readonly service = loadRaftService();
  private readonly server: grpc.Server;
  private readonly links = new Map<NodeId, PeerLink>();
  private handler: TransportHandler | null = null;
  private stopped = false;

  constructor(private readonly options: GrpcTransportOptions) {
    const messageBytesMax = options.grpcMessageBytesMax ?? grpcMessageBytesDefault;
    this.server = new grpc.Server({
      "grpc.max_receive_message_length": messageBytesMax,
      "grpc.max_send_message_length": messageBytesMax,
    });
    this.server.addService(this.service.service, { Send: this.handleSend.bind(this) });
    for (const [peer, address] of Object.entries(options.peers)) {
      if (peer !== options.nodeId) this.setPeer(peer, address);
    }
  }

  /** Where inbound messages go. Must be set before {@link start}. */
  setHandler(handler: TransportHandler): void {
    this.handler = handler;
  }

  /** Binds the server; resolves with the bound port. */
  start(): Promise<number> {
    const { caPem, certPem, keyPem } = this.options.tls;
    const credentials = grpc.ServerCredentials.createSsl(Buffer.from(caPem), [{ private_key: Buffer.from(keyPem), cert_chain: Buffer.from(certPem) }], true);
    return new Promise((resolve, reject) => {
      this.server.bindAsync(this.options.listenAddress, credentials, (error, port) => (error ? reject(error) : resolve(port)));
    });
  }

  /** Adds a peer or changes its address (a changed address re-creates its connection). */
  setPeer(peer: NodeId, address: string): void {
    const existing = this.links.get(peer);
    if (existing?.address === address) return;
    existing?.close();
    this.links.set(peer, new PeerLink(peer, address, this.options, this.service, () => this.handler));
  }

  removePeer(peer: NodeId): void {
    this.links.get(peer)?.close();
    this.links.delete(peer);
  }

  /** Queues messages for their receivers; never blocks. Unknown receivers are reported unreachable. */
  send(messages: readonly Message[]): void {
    if (this.stopped) return;
    for (const message of messages) {
      const link = this.links.get(message.to);
      if (link) link.enqueue(message);
      else this.handler?.reportUnreachable(message.to);
    }
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    for (const link of this.links.values()) link.close();
    this.links.clear();
    await new Promise<void>((resolve) => {
      // Inbound streams of peers that are still up (or a silent connection) would hold a graceful
      // shutdown open. grpc-js does not call tryShutdown's callback after a forceShutdown, so the
      // bound resolves on its own.
      const force = setTimeout(() => {
        this.server.forceShutdown();
        resolve();
      }, 200);
      this.server.tryShutdown(() => {
        clearTimeout(force);
        resolve();
      });
    });
  }

  private handleSend(call: grpc.ServerReadableStream<RaftEnvelope, object>, callback: grpc.sendUnaryData<object>): void {
    const peerName = peerCommonName(call);
    let finished = false;
    const finish = (error: Partial<grpc.StatusObject> | null) => {
      if (finished) return;
      finished = true;
      callback(error, error ? undefined : {});
    };
    call.on("data", (envelope: RaftEnvelope) => {
      if (finished) return;
      if (envelope.cluster_id !== this.options.clusterId || envelope.to !== this.options.nodeId || (peerName !== null && peerName !== envelope.from)) {
        finish({
          code: grpc.status.FAILED_PRECONDITION,
          details: `envelope for cluster ${envelope.cluster_id} node ${envelope.to} from ${envelope.from} refused by ${this.options.nodeId}`,
        });
        call.destroy();
        return;
      }
      const handler = this.handler;
      if (!handler || this.stopped) return;
      for (const bytes of envelope.messages) {
        let message: Message;
        try {
          message = this.options.codec.decode(bytes);
        } catch {
          continue; // A malformed message is dropped like a lost one; Raft tolerates loss.
        }
        if (message.from !== envelope.from) continue;
        handler.receive(message);
      }
    });
    call.on("end", () => finish(null));
    call.on("error", () => finish(null));
  }
}

function peerCommonName(call: grpc.ServerReadableStream<RaftEnvelope, object>): string | null {
  const certificate = call.getAuthContext?.().sslPeerCertificate;
  const name = certificate?.subject?.CN;
  return typeof name === "string" ? name : null;
}

/** One peer: a bounded queue drained into one client stream, re-opened with back-off when it breaks. */
class PeerLink {
  private readonly client: SendClient;
  private readonly queue: Message[] = [];
  private stream: grpc.ClientWritableStream<RaftEnvelope> | null = null;
  private waitingForDrain = false;
  private flushScheduled = false;
  private deferredFlushScheduled = false;
  private heldCommitNotice: Message | null = null;
  private holdTimer: NodeJS.Timeout | null = null;
  /** The highest commit index sent to this peer in an append. */
  private commitSent = 0;
  private reconnectTimer: NodeJS.Timeout | null = null;
  private reconnectDelayMs: number;
  private closed = false;
  private readonly queueMessagesMax: number;
  private readonly envelopeMessagesMax: number;
  private readonly reconnectDelayMinMs: number;
  private readonly reconnectDelayMaxMs: number;

  constructor(
    readonly peer: NodeId,
    readonly address: string,
    private readonly options: GrpcTransportOptions,
    service: grpc.ServiceClientConstructor,
    private readonly handler: () => TransportHandler | null,
  ) {
    this.queueMessagesMax = options.outboundQueueMessagesMax ?? outboundQueueMessagesDefault;
    this.envelopeMessagesMax = options.envelopeMessagesMax ?? envelopeMessagesDefault;
    this.reconnectDelayMinMs = options.reconnectDelayMinMs ?? reconnectDelayMinMsDefault;
    this.reconnectDelayMaxMs = options.reconnectDelayMaxMs ?? reconnectDelayMaxMsDefault;
    this.reconnectDelayMs = this.reconnectDelayMinMs;
    const { caPem, certPem, keyPem } = options.tls;
    const credentials = grpc.credentials.createSsl(Buffer.from(caPem), Buffer.from(keyPem), Buffer.from(certPem), {
      checkServerIdentity: (_host, certificate) =>
        certificate.subject?.CN === peer ? undefined : new Error(`peer at ${address} presented ${String(certificate.subject?.CN)}, expected ${peer}`),
    });
    const messageBytesMax = options.grpcMessageBytesMax ?? grpcMessageBytesDefault;
    this.client = new service(address, credentials, {
      "grpc.max_receive_message_length": messageBytesMax,
      "grpc.max_send_message_length": messageBytesMax,
      // The server is identified by its certificate's common name (checked above), not by the
      // address; a name also keeps TLS from being handed an IP address as server name.
      "grpc.ssl_target_name_override": /^[A-Za-z0-9.-]+$/.test(peer) ? peer : "localhost",
      "grpc.keepalive_time_ms": 10_000,
      "grpc.keepalive_timeout_ms": 5_000,
      "grpc.initial_reconnect_backoff_ms": this.reconnectDelayMinMs,
      "grpc.max_reconnect_backoff_ms": this.reconnectDelayMaxMs,
    }) as unknown as SendClient;
  }

  enqueue(message: Message): void {
    if (this.closed) return;
    const held = this.heldCommitNotice;
    if (held !== null) {
      this.heldCommitNotice = null;
      // A later append in the same term carries the leader's commit index too: the notice is
      // redundant. Anything else goes out behind it.
      const superseded = message.type === "app" && message.term === held.term && message.index >= held.index && message.commit >= held.commit;
      if (!superseded) this.push(held);
    }
    if (message.type === "app" && message.entries.length === 0 && message.commit > this.commitSent) {
      // A commit notice (an empty append that only moves the follower's commit index): held for
      // up to commitNoticeHoldMs, so that under load the next append carries the index instead.
      this.commitSent = message.commit;
      this.heldCommitNotice = message;
      if (this.holdTimer === null) {
        this.holdTimer = setTimeout(() => {
          this.holdTimer = null;
          const notice = this.heldCommitNotice;
          if (notice === null || this.closed) return;
          this.heldCommitNotice = null;
          this.push(notice);
        }, commitNoticeHoldMs);
        this.holdTimer.unref();
      }
      return;
    }
    if (message.type === "app") this.commitSent = Math.max(this.commitSent, message.commit);
    this.push(message);
  }

  private push(message: Message): void {
    if (this.queue.length >= this.queueMessagesMax) {
      this.reportFailure(message);
      return;
    }
    this.queue.push(message);
    if (this.flushScheduled) return;
    if (message.type === "app" && message.entries.length === 0) {
      // An append without entries (a leader's new commit index, a probe) is not waited for by a
      // client; it leaves on the next turn, after the answers the same Ready settled. It stays in
      // order: a message queued behind it meanwhile flushes the whole queue.
      if (this.deferredFlushScheduled) return;
      this.deferredFlushScheduled = true;
      nextTurn(() => {
        this.deferredFlushScheduled = false;
        this.flush();
      });
      return;
    }
    // Messages sent in the same turn travel in one envelope.
    this.flushScheduled = true;
    queueMicrotask(() => {
      this.flushScheduled = false;
      this.flush();
    });
  }

  close(): void {
    this.closed = true;
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    if (this.holdTimer) clearTimeout(this.holdTimer);
    this.heldCommitNotice = null;
    this.stream?.end();
    this.stream = null;
    this.queue.length = 0;
    this.client.close();
  }

  private flush(): void {
    if (this.closed || this.waitingForDrain || this.queue.length === 0) return;
    if (!this.stream) {
      if (this.reconnectTimer) return;
      this.openStream();
    }
    const stream = this.stream!;
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0, this.envelopeMessagesMax);
      const envelope: RaftEnvelope = {
        cluster_id: this.options.clusterId,
        from: this.options.nodeId,
        to: this.peer,
        messages: batch.map((message) => this.options.codec.encode(message)),
      };
      const snapshotCount = batch.filter((message) => message.type === "snap").length;
      const writable = stream.write(envelope, (error: Error | null | undefined) => {
        if (!error) this.reconnectDelayMs = this.reconnectDelayMinMs;
        for (let i = 0; i < snapshotCount; i++) this.handler()?.reportSnapshot(this.peer, !error);
      });
      if (!writable) {
        this.waitingForDrain = true;
        stream.once("drain", () => {
          this.waitingForDrain = false;
          this.flush();
        });
        return;
      }
    }
  }

  private openStream(): void {
    const stream = this.client.Send((error) => {
      if (this.stream !== stream) return;
      this.stream = null;
      this.waitingForDrain = false;
      if (error) this.handler()?.reportUnreachable(this.peer);
      this.scheduleReconnect();
    });
    // The call's callback above sees every failure; the error event would only repeat it.
    stream.on("error", () => undefined);
    this.stream = stream;
  }

  private scheduleReconnect(): void {
    if (this.closed || this.reconnectTimer) return;
    const delayMs = this.reconnectDelayMs;
    this.reconnectDelayMs = Math.min(this.reconnectDelayMs * 2, this.reconnectDelayMaxMs);
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      this.flush();
    }, delayMs);
    this.reconnectTimer.unref();
  }

  private reportFailure(message: Message): void {
    const handler = this.handler();
    if (!handler) return;
    if (message.type === "snap") handler.reportSnapshot(this.peer, false);
    handler.reportUnreachable(this.peer);
  }
}

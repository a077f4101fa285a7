/**
 * Client of the raft-kv servers: finds the leader, follows NOT_LEADER redirects and reports
 * whether a failed request's outcome is known. Used by the real-process test and the benchmark.
 * Puts travel by default over one long-lived stream per member (`PutStream`): the puts issued in
 * one event-loop turn share a message, and so do their answers, instead of one HTTP/2 stream
 * (headers, trailers, deadline timer) per put. `putPath: "unary"` uses one `Put` call per put.
 */
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { raftKvProtoPath } from "./raft-kv-proto.js";

export interface KvMember {
  readonly id: string;
  readonly kvAddress: string;
}

export interface RaftKvClientOptions {
  /** Deadline of one RPC. */
  readonly requestTimeoutMs?: number;
  /** NOT_LEADER answers followed before giving up on one operation. */
  readonly redirectsMax?: number;
  /** Pause before retrying when no leader is known (an election is running). */
  readonly noLeaderBackoffMs?: number;
  /** How puts travel: batched on a long-lived stream (default) or one unary call each. */
  readonly putPath?: "stream" | "unary";
}

/**
 * A failed operation. `outcomeKnown` false means the write may or may not have been applied
 * (a timeout, a broken connection, a leader that stepped down).
 */
export class KvClientError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly outcomeKnown: boolean,
  ) {
    super(message);
    this.name = "KvClientError";
  }
}

interface KvErrorReply {
  code: string;
  message: string;
  leader_id: string;
  leader_address: string;
}

type Rpc = (request: object, metadata: grpc.Metadata, options: grpc.CallOptions, callback: (error: grpc.ServiceError | null, reply: any) => void) => void;

type KvGrpcClient = grpc.Client & Record<string, Rpc> & { PutStream(): grpc.ClientDuplexStream<PutBatch, PutOutcomes> };

interface PutBatch {
  puts: { id: number; key: string; value: Buffer }[];
}

interface PutOutcomes {
  outcomes: { id: number; error: KvErrorReply | null; index: number }[];
}

/** What a failed transport reports; shaped like grpc-js's ServiceError, which the retry logic reads. */
type TransportFailure = Pick<grpc.ServiceError, "code" | "details">;

/** Bound on puts waiting for an answer on one stream; beyond it puts are refused at once. */
const streamPutsInFlightMax = 10_000;

const definedCodesWithKnownOutcome = new Set(["NOT_LEADER", "PROPOSAL_DROPPED"]);

export class RaftKvClient {
  private readonly clients = new Map<string, KvGrpcClient>();
  private readonly putStreams = new Map<string, PutStreamLink>();
  private readonly putPath: "stream" | "unary";
  private readonly addresses: string[];
  private leaderAddress: string;
  private readonly requestTimeoutMs: number;
  private readonly redirectsMax: number;
  private readonly noLeaderBackoffMs: number;
  private readonly service: grpc.ServiceClientConstructor;

  constructor(members: readonly KvMember[], options: RaftKvClientOptions = {}) {
    const definition = protoLoader.loadSync(raftKvProtoPath, { keepCase: true, longs: Number, defaults: true });
    this.service = (grpc.loadPackageDefinition(definition) as unknown as { cloud: { raftkv: { RaftKv: grpc.ServiceClientConstructor } } }).cloud.raftkv.RaftKv;
    this.addresses = members.map((m) => m.kvAddress);
    this.leaderAddress = this.addresses[0]!;
    this.requestTimeoutMs = options.requestTimeoutMs ?? 2_000;
    this.redirectsMax = options.redirectsMax ?? 50;
    this.noLeaderBackoffMs = options.noLeaderBackoffMs ?? 20;
    this.putPath = options.putPath ?? "stream";
  }

  async put(key: string, value: Uint8Array): Promise<{ index: number }> {
    const bytes = Buffer.from(value);
    const reply =
      this.putPath === "stream"
        ? await this.withRedirects((address) => this.putStreamTo(address).put(key, bytes, this.requestTimeoutMs), false)
        : await this.call("Put", { key, value: bytes }, false);
    return { index: Number(reply.index) };
  }

  /** A linearizable read; null when the key is absent. */
  async get(key: string): Promise<Uint8Array | null> {
    const reply = await this.call("Get", { key }, true);
    return reply.found ? new Uint8Array(reply.value) : null;
  }

  /** Writes `value` if the current value equals `expected` (null: absent). Returns the value before. */
  async cas(key: string, expected: Uint8Array | null, value: Uint8Array): Promise<{ swapped: boolean; current: Uint8Array | null }> {
    const reply = await this.call(
      "Cas",
      { key, expected: Buffer.from(expected ?? new Uint8Array(0)), expected_absent: expected === null, value: Buffer.from(value) },
      false,
    );
    return { swapped: reply.swapped, current: reply.found ? new Uint8Array(reply.current) : null };
  }

  /** The status of one member, or null when it does not answer. */
  async status(address: string): Promise<{ id: string; leader_id: string; role: string; term: number; applied: number; commit: number } | null> {
    try {
      return await this.rpc(address, "Status", {});
    } catch {
      return null;
    }
  }

  /** The member that says it is leader, or null. */
  async findLeader(): Promise<string | null> {
    for (const address of this.addresses) {
      const status = await this.status(address);
      if (status?.role === "leader") return address;
    }
    return null;
  }

  close(): void {
    for (const link of this.putStreams.values()) link.close();
    this.putStreams.clear();
    for (const client of this.clients.values()) client.close();
    this.clients.clear();
  }

  private call(method: string, request: object, idempotent: boolean): Promise<any> {
    return this.withRedirects((address) => this.rpc(address, method, request), idempotent);
  }

  /** Sends through `send` to the member believed leader, following redirects and retrying what is safe to retry. */
  private async withRedirects(send: (address: string) => Promise<any>, idempotent: boolean): Promise<any> {
    let lastError: KvClientError | null = null;
    for (let attempt = 0; attempt <= this.redirectsMax; attempt++) {
      const address = this.leaderAddress;
      let reply: any;
      try {
        reply = await send(address);
      } catch (error) {
        this.rotateFrom(address);
        const serviceError = error as grpc.ServiceError;
        // Connection refused means the request never left; anything else may have reached the server.
        const neverSent = serviceError.code === grpc.status.UNAVAILABLE && /ECONNREFUSED|No connection established/.test(serviceError.details ?? "");
        lastError = new KvClientError(grpc.status[serviceError.code] ?? "UNAVAILABLE", serviceError.details ?? String(error), neverSent);
        if (idempotent || neverSent) {
          await sleep(this.noLeaderBackoffMs);
          continue;
        }
        throw lastError;
      }
      const kvError = reply.error as KvErrorReply | null | undefined;
      if (!kvError || !kvError.code) return reply;
      const outcomeKnown = definedCodesWithKnownOutcome.has(kvError.code);
      lastError = new KvClientError(kvError.code, kvError.message, outcomeKnown);
      if (!outcomeKnown && !idempotent) throw lastError;
      if (kvError.code === "NOT_LEADER" && kvError.leader_address && kvError.leader_address !== address) {
        this.leaderAddress = kvError.leader_address;
        continue;
      }
      this.rotateFrom(address);
      await sleep(this.noLeaderBackoffMs);
    }
    throw lastError ?? new KvClientError("UNAVAILABLE", "no member answered", true);
  }

  private rotateFrom(address: string): void {
    if (this.leaderAddress !== address) return;
    const at = this.addresses.indexOf(address);
    this.leaderAddress = this.addresses[(at + 1) % this.addresses.length]!;
  }

  private clientFor(address: string): KvGrpcClient {
    let client = this.clients.get(address);
    if (!client) {
      client = new this.service(address, grpc.credentials.createInsecure(), {
        "grpc.initial_reconnect_backoff_ms": 20,
        "grpc.max_reconnect_backoff_ms": 200,
      }) as unknown as KvGrpcClient;
      this.clients.set(address, client);
    }
    return client;
  }

  private putStreamTo(address: string): PutStreamLink {
    let link = this.putStreams.get(address);
    if (!link || link.broken) {
      link = new PutStreamLink(this.clientFor(address));
      this.putStreams.set(address, link);
    }
    return link;
  }

  private rpc(address: string, method: string, request: object): Promise<any> {
    const target = this.clientFor(address);
    return new Promise((resolve, reject) => {
      target[method]!.call(target, request, new grpc.Metadata(), { deadline: Date.now() + this.requestTimeoutMs }, (error, reply) =>
        error ? reject(error) : resolve(reply),
      );
    });
  }
}

/**
 * One long-lived `PutStream` to a member. Puts issued in the same turn go out in one message; each
 * settles with the server's answer (`{ error, index }`, like a unary reply), or fails like a unary
 * call would: DEADLINE_EXCEEDED after its timeout, the stream's status when the stream breaks.
 */
class PutStreamLink {
  broken = false;
  private readonly stream: grpc.ClientDuplexStream<PutBatch, PutOutcomes>;
  private readonly waiting = new Map<number, PutWaiter>();
  private queued: { put: PutBatch["puts"][number]; waiter: PutWaiter }[] = [];
  private nextId = 1;

  constructor(client: KvGrpcClient) {
    this.stream = client.PutStream();
    this.stream.on("data", (message: PutOutcomes) => {
      for (const outcome of message.outcomes) {
        const id = Number(outcome.id);
        const waiter = this.waiting.get(id);
        if (!waiter) continue;
        this.settle(id, waiter);
        waiter.resolve(outcome);
      }
    });
    this.stream.on("error", (error: grpc.ServiceError) => this.fail({ code: error.code, details: error.details }));
    this.stream.on("end", () => this.fail({ code: grpc.status.UNAVAILABLE, details: "put stream ended" }));
  }

  put(key: string, value: Buffer, timeoutMs: number): Promise<any> {
    if (this.broken) return Promise.reject({ code: grpc.status.UNAVAILABLE, details: "put stream broken" });
    if (this.waiting.size >= streamPutsInFlightMax) return Promise.reject({ code: grpc.status.RESOURCE_EXHAUSTED, details: "too many puts in flight" });
    const id = this.nextId++;
    if (this.queued.length === 0) queueMicrotask(() => this.flush(timeoutMs));
    return new Promise((resolve, reject) => {
      const waiter: PutWaiter = { resolve, reject, batch: null };
      this.waiting.set(id, waiter);
      this.queued.push({ put: { id, key, value }, waiter });
    });
  }

  close(): void {
    this.fail({ code: grpc.status.CANCELLED, details: "client closed" });
  }

  private flush(timeoutMs: number): void {
    const queued = this.queued;
    this.queued = [];
    if (this.broken || queued.length === 0) return;
    this.stream.write({ puts: queued.map((q) => q.put) });
    // One deadline for the whole batch: its puts were issued together.
    const batch: PutBatchDeadline = { unsettled: queued.length, timer: null };
    batch.timer = setTimeout(() => {
      for (const { put } of queued) {
        const waiter = this.waiting.get(put.id);
        if (!waiter) continue;
        this.waiting.delete(put.id);
        waiter.reject({ code: grpc.status.DEADLINE_EXCEEDED, details: `no answer within ${timeoutMs} ms` });
      }
    }, timeoutMs);
    batch.timer.unref();
    for (const { waiter } of queued) waiter.batch = batch;
  }

  private settle(id: number, waiter: PutWaiter): void {
    this.waiting.delete(id);
    const batch = waiter.batch;
    if (batch !== null && --batch.unsettled === 0 && batch.timer !== null) clearTimeout(batch.timer);
  }

  private fail(failure: TransportFailure): void {
    if (this.broken) return;
    this.broken = true;
    this.queued = [];
    for (const [id, waiter] of this.waiting) {
      this.settle(id, waiter);
      waiter.reject(failure);
    }
    this.stream.cancel();
  }
}

interface PutBatchDeadline {
  unsettled: number;
  timer: NodeJS.Timeout | null;
}

interface PutWaiter {
  readonly resolve: (reply: any) => void;
  readonly reject: (failure: TransportFailure) => void;
  batch: PutBatchDeadline | null;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Client of the raft-kv servers: finds the leader, follows NOT_LEADER redirects and reports
 * whether a failed request's outcome is known. Used by the real-process test and the benchmark.
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

const definedCodesWithKnownOutcome = new Set(["NOT_LEADER", "PROPOSAL_DROPPED"]);

export class RaftKvClient {
  private readonly clients = new Map<string, grpc.Client & Record<string, Rpc>>();
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
  }

  async put(key: string, value: Uint8Array): Promise<{ index: number }> {
    const reply = await this.call("Put", { key, value: Buffer.from(value) }, false);
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
    for (const client of this.clients.values()) client.close();
    this.clients.clear();
  }

  private async call(method: string, request: object, idempotent: boolean): Promise<any> {
    let lastError: KvClientError | null = null;
    for (let attempt = 0; attempt <= this.redirectsMax; attempt++) {
      const address = this.leaderAddress;
      let reply: any;
      try {
        reply = await this.rpc(address, method, request);
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

  private rpc(address: string, method: string, request: object): Promise<any> {
    let client = this.clients.get(address);
    if (!client) {
      client = new this.service(address, grpc.credentials.createInsecure(), {
        "grpc.initial_reconnect_backoff_ms": 20,
        "grpc.max_reconnect_backoff_ms": 200,
      }) as unknown as grpc.Client & Record<string, Rpc>;
      this.clients.set(address, client);
    }
    const target = client;
    return new Promise((resolve, reject) => {
      target[method]!.call(target, request, new grpc.Metadata(), { deadline: Date.now() + this.requestTimeoutMs }, (error, reply) =>
        error ? reject(error) : resolve(reply),
      );
    });
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

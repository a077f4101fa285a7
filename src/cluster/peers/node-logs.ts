/**
 * Daemon log reads between members (`ReadNodeLogs`). A daemon's log records are mirrored only to
 * the controller holding its stream; a read that arises on another controller goes to the holder's
 * gRPC port, found in the holder's member record, under this controller's member certificate, and
 * the answer is the holder's page. A read that cannot be answered is an {@link ApiError}:
 *
 * | status | code | when |
 * |---|---|---|
 * | 503 | `LOG_HOLDER_UNAVAILABLE` | no member record gives the holder's gRPC address, its port cannot be reached, no answer within the deadline, or this controller is stopping |
 * | 502 | `LOG_HOLDER_ERROR` | the holder refused or failed the call (`NOT_A_MEMBER`, `INVALID_ARGUMENT`, an internal error) |
 *
 * Records from a peer are clamped again (`src/wire/log-records.ts`), as records from a daemon are.
 */
import * as grpc from "@grpc/grpc-js";
import { NODE_ID_PATTERN } from "../../domain/node-tokens/node-token-schemas.js";
import { LOG_LEVELS, type LogQuery } from "../../logs/log-query.js";
import { NODE_LOG_RECORDS_MAX, type NodeLogRead } from "../../logs/node-log-buffers.js";
import type { LogLevel, LogRecord } from "../../logs/types.js";
import { ApiError, assert } from "../../shared/errors.js";
import type { LogRecordMessage } from "../../wire/daemon-proto.js";
import { clampLogRecord, LOG_RECORD_FIELD_CHARS_MAX } from "../../wire/log-records.js";
import { fromGrpcError, type ReadNodeLogsRequest, type ReadNodeLogsResponse } from "./cluster-proto.js";
import type { MemberClients } from "./member-clients.js";

/** Deadline of one read from the holder (its work is an in-memory filter of at most 1,000 records). */
export const nodeLogReadTimeoutMs = 5_000;
/** The largest `limit` a read may ask for (the routes' bound). */
export const nodeLogReadLimitMax = 2_000;

/** Reads this controller's buffer of a node for another member. */
export type NodeLogReadHandler = (nodeId: string, query: LogQuery) => NodeLogRead;

const nodeIdPattern = new RegExp(NODE_ID_PATTERN);
const invalid = (message: string) => new ApiError(400, "INVALID_ARGUMENT", message);

/** The empty page: a controller that holds nothing for the node. */
export const emptyNodeLogRead = (): NodeLogRead => ({ records: [], size: 0, capacity: NODE_LOG_RECORDS_MAX, droppedOnDaemon: 0, lastSeq: 0 });

/** A buffer record as the wire carries it. */
export function toLogRecordMessage(record: LogRecord): LogRecordMessage {
  return {
    level: record.level,
    logger: record.logger,
    message: record.message,
    timestamp_ms: record.ts,
    seq: record.seq,
    thread: record.thread,
    throwable: record.throwable ?? "",
    mdc: record.mdc ?? {},
    dropped_before: 0,
  };
}

/** A wire record (clamped here) as a buffer record. */
export function fromLogRecordMessage(message: LogRecordMessage): LogRecord {
  return fromDaemonRecord(clampLogRecord(message));
}

/** A daemon's record (already clamped) as a buffer record. */
export function fromDaemonRecord(record: LogRecordMessage): LogRecord {
  const out: LogRecord = {
    seq: record.seq,
    ts: record.timestamp_ms,
    level: record.level as LogLevel,
    logger: record.logger,
    thread: record.thread,
    message: record.message,
  };
  if (record.throwable !== "") out.throwable = record.throwable;
  if (Object.keys(record.mdc).length > 0) out.mdc = record.mdc;
  return out;
}

/** The request reading `nodeId`'s records through `query`. */
export function readNodeLogsRequest(nodeId: string, query: LogQuery): ReadNodeLogsRequest {
  return { node_id: nodeId, level: query.level ?? "", logger: query.logger ?? "", limit: query.limit ?? 0, after_seq: query.afterSeq ?? 0 };
}

/** The node and filters a request carries; INVALID_ARGUMENT for a bad node id or filter. */
export function readReadNodeLogs(request: ReadNodeLogsRequest): { nodeId: string; query: LogQuery } {
  if (!nodeIdPattern.test(request.node_id)) throw invalid(`node_id must match ${nodeIdPattern.source}`);
  const query: LogQuery = {};
  if (request.level !== "") {
    if (!(LOG_LEVELS as readonly string[]).includes(request.level)) throw invalid(`level must be one of ${LOG_LEVELS.join(", ")}`);
    query.level = request.level as LogLevel;
  }
  if (request.logger !== "") {
    if (request.logger.length > LOG_RECORD_FIELD_CHARS_MAX.logger) throw invalid(`logger: at most ${LOG_RECORD_FIELD_CHARS_MAX.logger} characters`);
    query.logger = request.logger;
  }
  if (request.limit !== 0) {
    if (!Number.isSafeInteger(request.limit) || request.limit < 1 || request.limit > nodeLogReadLimitMax) throw invalid(`limit: 1 to ${nodeLogReadLimitMax}`);
    query.limit = request.limit;
  }
  if (request.after_seq !== 0) {
    if (!Number.isSafeInteger(request.after_seq) || request.after_seq < 0) throw invalid("after_seq: a non-negative integer");
    query.afterSeq = request.after_seq;
  }
  return { nodeId: request.node_id, query };
}

/** The answer carrying `read`. */
export function nodeLogsResponse(read: NodeLogRead): ReadNodeLogsResponse {
  return {
    records: read.records.map(toLogRecordMessage),
    size: read.size,
    capacity: read.capacity,
    last_seq: read.lastSeq,
    dropped_on_daemon: read.droppedOnDaemon,
  };
}

const count = (value: number) => (Number.isSafeInteger(value) && value > 0 ? value : 0);

/** The page an answer carries, its records clamped. */
export function fromNodeLogsResponse(response: ReadNodeLogsResponse): NodeLogRead {
  return {
    records: response.records.map(fromLogRecordMessage),
    size: count(response.size),
    capacity: count(response.capacity),
    droppedOnDaemon: count(response.dropped_on_daemon),
    lastSeq: count(response.last_seq),
  };
}

/**
 * Where the `ReadNodeLogs` calls of other members are handed: this controller's per-node buffers,
 * once the logs part serves them. Until then every read is the empty page.
 */
export class ForwardedLogReads {
  private handler: NodeLogReadHandler | null = null;

  /** Serves forwarded reads with `handler`; returns the function that stops serving. */
  serve(handler: NodeLogReadHandler): () => void {
    assert(this.handler === null, "forwarded node log reads already have a handler");
    this.handler = handler;
    return () => {
      if (this.handler === handler) this.handler = null;
    };
  }

  run(nodeId: string, query: LogQuery): NodeLogRead {
    return this.handler ? this.handler(nodeId, query) : emptyNodeLogRead();
  }
}

const unavailable = (message: string) => new ApiError(503, "LOG_HOLDER_UNAVAILABLE", message);

/**
 * This controller's side of log reads between members: reads from the member holding a daemon's
 * stream and serves the other members' through {@link ForwardedLogReads}. Owns its clients (one per
 * member address, with their own channels) and closes them in {@link close}.
 */
export class MemberLogLink {
  private closed = false;

  constructor(
    private readonly clients: MemberClients,
    /** The gRPC address of a member, or null when not known. */
    private readonly grpcAddressOf: (memberId: string) => string | null,
    private readonly served: ForwardedLogReads,
    private readonly timeoutMs = nodeLogReadTimeoutMs,
  ) {}

  /** Reads `nodeId`'s records from the member `controllerId`; rejects with the errors of the module comment. */
  async read(controllerId: string, nodeId: string, query: LogQuery): Promise<NodeLogRead> {
    if (this.closed) throw unavailable("The controller is stopping");
    const address = this.grpcAddressOf(controllerId);
    if (!address) throw unavailable(`Controller ${controllerId} holds the stream of node ${nodeId} but no member record here gives its gRPC address`);
    try {
      return fromNodeLogsResponse(await this.clients.readNodeLogs(address, readNodeLogsRequest(nodeId, query), this.timeoutMs));
    } catch (err) {
      throw this.failure(err, controllerId, nodeId);
    }
  }

  serve(handler: NodeLogReadHandler): () => void {
    return this.served.serve(handler);
  }

  close(): void {
    this.closed = true;
    this.clients.close();
  }

  private failure(err: unknown, controllerId: string, nodeId: string): ApiError {
    const error = err as Partial<grpc.ServiceError>;
    if (typeof error.code !== "number") return unavailable(`Reading the log of node ${nodeId} from controller ${controllerId} failed: ${String(err)}`);
    const expected = fromGrpcError(error as grpc.ServiceError);
    if (expected)
      return new ApiError(502, "LOG_HOLDER_ERROR", `Controller ${controllerId} refused the log read of node ${nodeId}: ${expected.code}: ${expected.message}`);
    switch (error.code) {
      case grpc.status.DEADLINE_EXCEEDED:
        return unavailable(`Controller ${controllerId}, holding the stream of node ${nodeId}, did not answer within ${this.timeoutMs} ms`);
      case grpc.status.UNAVAILABLE:
      case grpc.status.CANCELLED:
        return unavailable(`Controller ${controllerId}, holding the stream of node ${nodeId}, cannot be reached: ${error.details ?? ""}`);
      default:
        return new ApiError(502, "LOG_HOLDER_ERROR", `Controller ${controllerId} failed the log read of node ${nodeId}: ${error.details ?? String(err)}`);
    }
  }
}

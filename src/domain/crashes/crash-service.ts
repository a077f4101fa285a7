/**
 * Crash records: one per unexpected instance exit. The service owns the `crashes` collection,
 * indexed on group, nodeId and timestamp, and expiring 30 days after `timestamp` (`crashes_ttl`).
 */
import { randomUUID } from "node:crypto";
import type { Clock } from "../../shared/clock.js";
import { notFound, validationError } from "../../shared/errors.js";
import type { Collection, Doc, DocumentStore, Filter } from "../../store/ports.js";
import { isoFromMs, parseIsoMs } from "../shared/time.js";
import type { Crash } from "./crash-schemas.js";

/** Collection owned by {@link CrashService}. */
export const CRASHES_COLLECTION = "crashes";
/** Crash records are kept 30 days (spec document 1, "Limits"). */
export const crashRetentionSeconds = 30 * 24 * 60 * 60;
/** A list answers at most this many records (the newest). */
export const crashListMax = 10_000;
/** Default page of a list when no limit is given. */
export const crashListDefault = 1_000;
/** Console lines kept in a record. */
export const crashLogTailLinesMax = 200;

/** The stored crash document. */
export interface StoredCrash extends Doc {
  instanceId: string;
  group: string;
  nodeId: string;
  exitCode: number;
  classification: string;
  logTail: string[];
  uptimeMs: number;
  /** Why, in one line (absent on records written before reasons were kept). */
  reason?: string;
  /** ISO 8601 UTC (toISOString form, so string order is time order). */
  timestamp: string;
}

/** Filters of GET /api/v1/crashes; empty values are ignored. */
export interface CrashFilter {
  group?: string;
  node?: string;
  /** ISO 8601: crashes at or after this instant. */
  from?: string;
  limit?: number;
}

/** What the daemon gateway reports when an instance crashes. */
export interface CrashReport {
  instanceId: string;
  group: string;
  nodeId: string;
  exitCode: number;
  classification: string;
  logTail: readonly string[];
  uptimeMs: number;
  /** Why, in one line: the daemon's refusal or failure, or the exit and the last line printed. */
  reason?: string;
  /** Epoch ms; the clock's now when omitted. */
  timestampMs?: number;
}

/** Records and lists crashes, newest first. */
export class CrashService {
  private readonly crashes: Collection<StoredCrash>;

  constructor(
    store: DocumentStore,
    private readonly clock: Clock,
  ) {
    this.crashes = store.collection<StoredCrash>(CRASHES_COLLECTION, {
      indexes: [
        { name: "crashes_group", field: "group" },
        { name: "crashes_node", field: "nodeId" },
        { name: "crashes_timestamp", field: "timestamp" },
      ],
      ttl: { name: "crashes_ttl", field: "timestamp", seconds: crashRetentionSeconds },
    });
  }

  /** Crashes matching every filter, newest first; 422 naming `from` or `limit` when invalid. */
  async list(filter: CrashFilter = {}): Promise<Crash[]> {
    const limit = filter.limit ?? crashListDefault;
    if (!Number.isInteger(limit) || limit < 1 || limit > crashListMax) {
      throw validationError(`limit: must be an integer between 1 and ${crashListMax}`);
    }
    const query: Filter = {};
    if (filter.group) query.group = filter.group;
    if (filter.node) query.nodeId = filter.node;
    if (filter.from) query.timestamp = { $gte: isoFromMs(parseIsoMs(filter.from, "from")) };
    const docs = await this.crashes.find(query, { sort: { field: "timestamp", direction: -1 }, limit });
    return docs.map(toCrash);
  }

  /** How many crash records are kept (the `cloud_crashes_total` gauge). */
  count(): Promise<number> {
    return this.crashes.count();
  }

  /** One crash; 404 `Crash not found: <id>` when unknown. */
  async get(id: string): Promise<Crash> {
    const doc = await this.crashes.get(id);
    if (!doc) throw notFound(`Crash not found: ${id}`);
    return toCrash(doc);
  }

  /** Stores a crash report and returns the record. */
  async record(report: CrashReport): Promise<Crash> {
    const doc: StoredCrash = {
      _id: randomUUID(),
      instanceId: report.instanceId,
      group: report.group,
      nodeId: report.nodeId,
      exitCode: report.exitCode,
      classification: report.classification,
      logTail: report.logTail.slice(-crashLogTailLinesMax),
      uptimeMs: report.uptimeMs,
      ...(report.reason !== undefined ? { reason: report.reason } : {}),
      timestamp: isoFromMs(report.timestampMs ?? this.clock.nowMs()),
    };
    await this.crashes.insert(doc);
    return toCrash(doc);
  }
}

function toCrash(doc: StoredCrash): Crash {
  return {
    id: doc._id,
    instanceId: doc.instanceId,
    group: doc.group,
    nodeId: doc.nodeId,
    node: doc.nodeId,
    exitCode: doc.exitCode,
    classification: doc.classification,
    logTail: doc.logTail,
    uptimeMs: doc.uptimeMs,
    reason: doc.reason ?? null,
    timestamp: doc.timestamp,
    crashedAt: doc.timestamp,
  };
}

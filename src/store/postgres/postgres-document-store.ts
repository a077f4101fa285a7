/**
 * PostgreSQL document store (`pg`) for the production profile when no MongoDB is available.
 *
 * One table per collection, `doc_<name> (id text COLLATE "C" PRIMARY KEY, doc jsonb NOT NULL,
 * expires_at bigint, rev text)`: `id` mirrors `_id` with byte-order comparison (like MongoDB's),
 * `doc` is the whole JSON document, `expires_at` is the TTL deadline in epoch ms computed when the
 * document is written (NULL when the collection has no TTL or the field is absent), and `rev` the
 * document's revision (a conditional write is one `UPDATE … WHERE rev = $expected`). Declared
 * indexes become expression indexes on `doc #> '{field}'`; the TTL becomes an index on
 * `expires_at`. Reads hide expired rows, and a sweeper deletes them in bounded batches.
 * Each statement commits on its own, durably (PostgreSQL's defaults: fsync, synchronous_commit).
 * Connections, host failover and timeouts: postgres-pool.ts.
 */
import { TtlSweeper } from "../ttl-sweeper.js";
import pg from "pg";
import type { Clock } from "../../shared/clock.js";
import { systemClock } from "../../shared/clock.js";
import { assert } from "../../shared/errors.js";
import type { Collection, CollectionSpec, Doc, DocumentImportBatch, DocumentSnapshot, DocumentStore } from "../ports.js";
import { newRevision } from "../revisions.js";
import { PostgresCollection } from "./postgres-collection.js";
import { PostgresPool } from "./postgres-pool.js";
import { quoteIdentifier } from "./sql-query.js";

/** Options of {@link openPostgresDocumentStore}. */
export interface PostgresDocumentStoreOptions {
  /**
   * postgres:// or postgresql:// connection URI; several hosts (`host1:5432,host2:5432`) with
   * `target_session_attrs=read-write` follow a failover to the writable one (postgres-pool.ts).
   */
  uri: string;
  /** Time source for TTL deadlines and read-time expiry. */
  clock?: Clock;
  /** How often expired rows are deleted; 0 disables the timer (reads still hide them). */
  ttlSweepIntervalMs?: number;
  /** Rows deleted per collection and sweep. */
  ttlSweepBatchMax?: number;
  /** Connections in the pool. */
  poolConnectionsMax?: number;
  /** Bound of connecting, or of waiting for a free connection. Default 2 s. */
  connectTimeoutMs?: number;
  /** Bound of one statement (imports and snapshot pages: {@link longStatementTimeoutMs}). Default 4 s. */
  queryTimeoutMs?: number;
}

const defaultTtlSweepIntervalMs = 60_000;
const defaultTtlSweepBatchMax = 1_000;
const defaultPoolConnectionsMax = 10;
/** Bound of an import statement or a snapshot page, which move up to hundreds of kilobytes. */
const longStatementTimeoutMs = 60_000;

/** Connects and returns the store; fails when the database is unreachable. */
export async function openPostgresDocumentStore(options: PostgresDocumentStoreOptions): Promise<PostgresDocumentStore> {
  const pool = new PostgresPool({
    uri: options.uri,
    poolConnectionsMax: options.poolConnectionsMax ?? defaultPoolConnectionsMax,
    connectTimeoutMs: options.connectTimeoutMs ?? 2_000,
    queryTimeoutMs: options.queryTimeoutMs ?? 4_000,
  });
  const store = new PostgresDocumentStore(pool, options);
  try {
    await store.ping();
  } catch (error) {
    await pool.end();
    throw error;
  }
  return store;
}

/** The PostgreSQL {@link DocumentStore}; create it with {@link openPostgresDocumentStore}. */
export class PostgresDocumentStore implements DocumentStore {
  private readonly collections = new Map<string, PostgresCollection<Doc>>();
  private readonly clock: Clock;
  private readonly ttlSweepBatchMax: number;
  private readonly sweeper: TtlSweeper;
  private closed = false;

  constructor(
    private readonly pool: PostgresPool,
    options: PostgresDocumentStoreOptions,
  ) {
    this.clock = options.clock ?? systemClock;
    this.ttlSweepBatchMax = options.ttlSweepBatchMax ?? defaultTtlSweepBatchMax;
    assert(this.ttlSweepBatchMax > 0, "ttlSweepBatchMax must be positive");
    this.sweeper = new TtlSweeper(options.ttlSweepIntervalMs ?? defaultTtlSweepIntervalMs, () => this.sweepExpired(), this.clock);
  }

  collection<T extends Doc = Doc>(name: string, spec?: CollectionSpec): Collection<T> {
    assert(!this.closed, "document store is closed");
    const existing = this.collections.get(name);
    if (existing) {
      assert(spec === undefined || JSON.stringify(spec) === JSON.stringify(existing.spec), `collection ${name} reopened with a different spec`);
      return existing as unknown as Collection<T>;
    }
    const created = new PostgresCollection<Doc>(this.pool, name, spec ?? {}, this.clock);
    this.collections.set(name, created);
    return created as unknown as Collection<T>;
  }

  /** Deletes up to `ttlSweepBatchMax` expired rows per TTL collection; returns how many. */
  async sweepExpired(): Promise<number> {
    let removed = 0;
    for (const collection of this.collections.values()) {
      if (this.closed) break;
      removed += await collection.sweepExpired(this.ttlSweepBatchMax);
    }
    return removed;
  }

  /**
   * One REPEATABLE READ, READ ONLY transaction on a connection of its own: PostgreSQL takes the
   * transaction's snapshot at its first query (the table list, run here), and every later read
   * of the snapshot sees the database as of that moment.
   */
  async snapshot(): Promise<DocumentSnapshot> {
    assert(!this.closed, "document store is closed");
    const client = await this.pool.connect();
    const pool = this.pool;
    let names: string[];
    try {
      await client.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
      const tables = await client.query<{ name: string }>(
        `SELECT substr(tablename, 5) AS name FROM pg_tables WHERE schemaname = current_schema() AND tablename LIKE 'doc\\_%' ORDER BY 1`,
      );
      names = tables.rows.map((row) => row.name).sort();
    } catch (error) {
      await client.query("ROLLBACK").catch(() => undefined); // the first error is the one to report
      client.release(true);
      throw pool.clientFailed(error);
    }
    const nowMs = Math.floor(this.clock.nowMs());
    return {
      collections: async () => [...names],
      async *documents(collection: string, batchMax: number): AsyncGenerator<Doc[]> {
        if (!names.includes(collection)) return;
        const table = quoteIdentifier(`doc_${collection}`);
        let after: string | null = null;
        for (;;) {
          const page: pg.QueryResult<{ id: string; doc: Doc }> = await client
            .query<{ id: string; doc: Doc }>({
              text: `SELECT id, doc FROM ${table} WHERE ($1::text IS NULL OR id > $1) AND (expires_at IS NULL OR expires_at > $2) ORDER BY id LIMIT $3`,
              values: [after, nowMs, batchMax],
              query_timeout: longStatementTimeoutMs,
            } as pg.QueryConfig)
            .catch((error: unknown) => Promise.reject(pool.clientFailed(error)));
          if (page.rows.length === 0) return;
          after = page.rows[page.rows.length - 1].id;
          yield page.rows.map((row) => row.doc);
        }
      },
      release: async () => {
        try {
          await client.query("COMMIT");
        } finally {
          client.release();
        }
      },
    };
  }

  /** Imports every batch in one transaction: the collections change all at once or not at all. */
  async importCollections(batches: AsyncIterable<DocumentImportBatch>): Promise<Map<string, number>> {
    assert(!this.closed, "document store is closed");
    const counts = new Map<string, number>();
    const client = await this.pool.connect();
    try {
      await client.query("BEGIN");
      for await (const batch of batches) {
        const target = this.importTarget(batch.collection);
        const table = quoteIdentifier(`doc_${batch.collection}`);
        if (!counts.has(batch.collection)) {
          await target.prepare(); // its own connection, before this transaction locks the table
          await client.query(`DELETE FROM ${table}`);
          counts.set(batch.collection, 0);
        }
        if (batch.documents.length === 0) continue;
        const rows = batch.documents.map((doc) => target.row(doc));
        await client.query({
          text: `INSERT INTO ${table} (id, doc, expires_at, rev) SELECT * FROM unnest($1::text[], $2::jsonb[], $3::bigint[], $4::text[])`,
          values: [rows.map((row) => row.id), rows.map((row) => row.json), rows.map((row) => row.expiresAtMs), rows.map(() => newRevision())],
          query_timeout: longStatementTimeoutMs,
        } as pg.QueryConfig);
        counts.set(batch.collection, counts.get(batch.collection)! + rows.length);
      }
      await client.query("COMMIT");
      return counts;
    } catch (error) {
      await client.query("ROLLBACK").catch(() => undefined); // the import's error is the one to report
      throw this.pool.clientFailed(error);
    } finally {
      client.release();
    }
  }

  /** The open collection, or a detached one without indexes or TTL (its service declares them when it opens it). */
  private importTarget(name: string): PostgresCollection<Doc> {
    return this.collections.get(name) ?? new PostgresCollection<Doc>(this.pool, name, {}, this.clock);
  }

  async ping(): Promise<void> {
    await this.pool.query("SELECT 1");
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.sweeper.stop();
    await this.pool.end();
  }
}

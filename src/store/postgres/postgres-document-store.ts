/**
 * PostgreSQL document store (`pg`) for the production profile when no MongoDB is available.
 *
 * One table per collection, `doc_<name> (id text COLLATE "C" PRIMARY KEY, doc jsonb NOT NULL,
 * expires_at bigint)`: `id` mirrors `_id` with byte-order comparison (like MongoDB's), `doc` is
 * the whole JSON document, and `expires_at` is the TTL deadline in epoch ms computed when the
 * document is written (NULL when the collection has no TTL or the field is absent). Declared
 * indexes become expression indexes on `doc #> '{field}'`; the TTL becomes an index on
 * `expires_at`. Reads hide expired rows, and a sweeper deletes them in bounded batches.
 * Each statement commits on its own, durably (PostgreSQL's defaults: fsync, synchronous_commit).
 */
import { TtlSweeper } from "../ttl-sweeper.js";
import { createHash } from "node:crypto";
import pg from "pg";
import type { Clock } from "../../shared/clock.js";
import { systemClock } from "../../shared/clock.js";
import { assert } from "../../shared/errors.js";
import { assertCollectionName, assertFieldPath, assertValidFilter, assertValidFindOptions, getPath, toJsonDocument, ttlBaseMs } from "../document-query.js";
import type { Collection, CollectionSpec, Doc, DocumentImportBatch, DocumentSnapshot, DocumentStore, Filter, FindOptions } from "../ports.js";
import { DuplicateKeyError } from "../ports.js";
import { fieldExpression, filterConditions, orderBy, quoteIdentifier, SqlParams } from "./sql-query.js";

/** Options of {@link openPostgresDocumentStore}. */
export interface PostgresDocumentStoreOptions {
  /** postgres:// or postgresql:// connection URI. */
  uri: string;
  /** Time source for TTL deadlines and read-time expiry. */
  clock?: Clock;
  /** How often expired rows are deleted; 0 disables the timer (reads still hide them). */
  ttlSweepIntervalMs?: number;
  /** Rows deleted per collection and sweep. */
  ttlSweepBatchMax?: number;
  /** Connections in the pool. */
  poolConnectionsMax?: number;
}

const defaultTtlSweepIntervalMs = 60_000;
const defaultTtlSweepBatchMax = 1_000;
const defaultPoolConnectionsMax = 10;
const identifierBytesMax = 63;
const uniqueViolation = "23505";

/** Connects and returns the store; fails when the database is unreachable. */
export async function openPostgresDocumentStore(options: PostgresDocumentStoreOptions): Promise<PostgresDocumentStore> {
  const pool = new pg.Pool({ connectionString: options.uri, max: options.poolConnectionsMax ?? defaultPoolConnectionsMax });
  pool.on("error", () => undefined); // idle-client errors surface on the next query instead
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
    private readonly pool: pg.Pool,
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
    let names: string[];
    try {
      await client.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
      const tables = await client.query<{ name: string }>(
        `SELECT substr(tablename, 5) AS name FROM pg_tables WHERE schemaname = current_schema() AND tablename LIKE 'doc\\_%' ORDER BY 1`,
      );
      names = tables.rows.map((row) => row.name).sort();
    } catch (error) {
      await client.query("ROLLBACK").catch(() => undefined); // the first error is the one to report
      client.release();
      throw error;
    }
    const nowMs = Math.floor(this.clock.nowMs());
    return {
      collections: async () => [...names],
      async *documents(collection: string, batchMax: number): AsyncGenerator<Doc[]> {
        if (!names.includes(collection)) return;
        const table = quoteIdentifier(`doc_${collection}`);
        let after: string | null = null;
        for (;;) {
          const page: pg.QueryResult<{ id: string; doc: Doc }> = await client.query<{ id: string; doc: Doc }>(
            `SELECT id, doc FROM ${table} WHERE ($1::text IS NULL OR id > $1) AND (expires_at IS NULL OR expires_at > $2) ORDER BY id LIMIT $3`,
            [after, nowMs, batchMax],
          );
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
        await client.query(`INSERT INTO ${table} (id, doc, expires_at) SELECT * FROM unnest($1::text[], $2::jsonb[], $3::bigint[])`, [
          rows.map((row) => row.id),
          rows.map((row) => row.json),
          rows.map((row) => row.expiresAtMs),
        ]);
        counts.set(batch.collection, counts.get(batch.collection)! + rows.length);
      }
      await client.query("COMMIT");
      return counts;
    } catch (error) {
      await client.query("ROLLBACK").catch(() => undefined); // the import's error is the one to report
      throw error;
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

/** An identifier of at most 63 bytes: `name`, or a prefix of it plus a hash when too long. */
function boundedIdentifier(name: string): string {
  if (Buffer.byteLength(name) <= identifierBytesMax) return name;
  const hash = createHash("sha256").update(name).digest("hex").slice(0, 12);
  return `${name.slice(0, identifierBytesMax - 13)}_${hash}`;
}

class PostgresCollection<T extends Doc> implements Collection<T> {
  private readonly table: string;
  private readonly indexNames = new Map<string, string>(); // SQL index name → declared name
  private ready: Promise<void> | undefined;

  constructor(
    private readonly pool: pg.Pool,
    readonly name: string,
    readonly spec: CollectionSpec,
    private readonly clock: Clock,
  ) {
    assertCollectionName(name);
    this.table = `doc_${name}`;
    for (const index of spec.indexes ?? []) {
      assertFieldPath(index.field);
      this.indexNames.set(boundedIdentifier(`${this.table}_${index.name}`), index.name);
    }
    if (spec.ttl) {
      assertFieldPath(spec.ttl.field);
      assert(spec.ttl.seconds > 0, "ttl seconds must be positive");
    }
  }

  /** Creates the table and indexes when missing. */
  prepare(): Promise<void> {
    return this.init();
  }

  /** The row an imported document becomes. */
  row(doc: Doc): { id: string; json: string; expiresAtMs: number | null } {
    const stored = toJsonDocument(doc);
    return { id: stored._id, json: JSON.stringify(stored), expiresAtMs: this.expiresAtMs(stored) };
  }

  async insert(doc: T): Promise<void> {
    const stored = toJsonDocument(doc);
    await this.init();
    const table = quoteIdentifier(this.table);
    // An expired row with the same id is logically absent: replace it.
    const sql =
      `INSERT INTO ${table} AS t (id, doc, expires_at) VALUES ($1, $2, $3) ` +
      `ON CONFLICT (id) DO UPDATE SET doc = EXCLUDED.doc, expires_at = EXCLUDED.expires_at ` +
      `WHERE t.expires_at IS NOT NULL AND t.expires_at <= $4`;
    const result = await this.writeRow(sql, [stored._id, JSON.stringify(stored), this.expiresAtMs(stored), this.nowMs()]);
    if (result.rowCount === 0) throw new DuplicateKeyError(this.name, stored._id);
  }

  async put(doc: T): Promise<void> {
    const stored = toJsonDocument(doc);
    await this.init();
    const sql =
      `INSERT INTO ${quoteIdentifier(this.table)} (id, doc, expires_at) VALUES ($1, $2, $3) ` +
      `ON CONFLICT (id) DO UPDATE SET doc = EXCLUDED.doc, expires_at = EXCLUDED.expires_at`;
    await this.writeRow(sql, [stored._id, JSON.stringify(stored), this.expiresAtMs(stored)]);
  }

  async get(id: string): Promise<T | null> {
    await this.init();
    const result = await this.pool.query<{ doc: T }>(
      `SELECT doc FROM ${quoteIdentifier(this.table)} WHERE id = $1 AND (expires_at IS NULL OR expires_at > $2)`,
      [id, this.nowMs()],
    );
    return result.rows[0]?.doc ?? null;
  }

  async delete(id: string): Promise<boolean> {
    await this.init();
    const result = await this.pool.query<{ live: boolean }>(
      `DELETE FROM ${quoteIdentifier(this.table)} WHERE id = $1 RETURNING (expires_at IS NULL OR expires_at > $2) AS live`,
      [id, this.nowMs()],
    );
    return result.rows[0]?.live === true;
  }

  async find(filter: Filter = {}, options: FindOptions = {}): Promise<T[]> {
    assertValidFilter(filter);
    assertValidFindOptions(options);
    await this.init();
    const params = new SqlParams();
    let sql = `SELECT doc FROM ${quoteIdentifier(this.table)} WHERE ${this.where(filter, params)} ORDER BY ${orderBy(options.sort)}`;
    if (options.limit !== undefined) sql += ` LIMIT ${params.add(options.limit)}`;
    if (options.skip) sql += ` OFFSET ${params.add(options.skip)}`;
    const result = await this.pool.query<{ doc: T }>(sql, params.values);
    return result.rows.map((row) => row.doc);
  }

  async count(filter: Filter = {}): Promise<number> {
    assertValidFilter(filter);
    await this.init();
    const params = new SqlParams();
    const result = await this.pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM ${quoteIdentifier(this.table)} WHERE ${this.where(filter, params)}`,
      params.values,
    );
    return result.rows[0].n;
  }

  async deleteMany(filter: Filter = {}): Promise<number> {
    assertValidFilter(filter);
    await this.init();
    const params = new SqlParams();
    const result = await this.pool.query(`DELETE FROM ${quoteIdentifier(this.table)} WHERE ${this.where(filter, params)}`, params.values);
    return result.rowCount ?? 0;
  }

  /** Deletes up to `batchMax` expired rows; returns how many. */
  async sweepExpired(batchMax: number): Promise<number> {
    if (!this.spec.ttl) return 0;
    await this.init();
    const table = quoteIdentifier(this.table);
    const result = await this.pool.query(`DELETE FROM ${table} WHERE id IN (SELECT id FROM ${table} WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2)`, [
      this.nowMs(),
      batchMax,
    ]);
    return result.rowCount ?? 0;
  }

  private where(filter: Filter, params: SqlParams): string {
    const conditions = filterConditions(filter, params);
    conditions.push(`(expires_at IS NULL OR expires_at > ${params.add(this.nowMs())})`);
    return conditions.join(" AND ");
  }

  /**
   * Runs an insert/upsert, mapping unique violations to DuplicateKeyError. A violation may come
   * from an expired row that still holds the value until swept; those rows are deleted and the
   * write is tried once more.
   */
  private async writeRow(sql: string, values: unknown[]): Promise<pg.QueryResult> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.pool.query(sql, values);
      } catch (error) {
        if (!isUniqueViolation(error)) throw error;
        if (attempt === 0 && this.spec.ttl) {
          await this.pool.query(`DELETE FROM ${quoteIdentifier(this.table)} WHERE expires_at <= $1`, [this.nowMs()]);
          continue;
        }
        const declared = error.constraint ? this.indexNames.get(error.constraint) : undefined;
        throw new DuplicateKeyError(this.name, declared ? `${declared}: ${error.detail ?? ""}` : String(values[0]));
      }
    }
  }

  /** Whole milliseconds, as `expires_at` (bigint) holds them. */
  private nowMs(): number {
    return Math.floor(this.clock.nowMs());
  }

  private expiresAtMs(doc: Doc): number | null {
    const ttl = this.spec.ttl;
    if (!ttl) return null;
    const baseMs = ttlBaseMs(getPath(doc, ttl.field));
    return baseMs === null ? null : Math.ceil(baseMs + ttl.seconds * 1000);
  }

  private init(): Promise<void> {
    this.ready ??= this.createSchema().catch((error: unknown) => {
      this.ready = undefined; // let the next call retry, e.g. after the database comes back
      throw error;
    });
    return this.ready;
  }

  /** Creates the table and indexes; an advisory lock serializes controllers doing it at once. */
  private async createSchema(): Promise<void> {
    const table = quoteIdentifier(this.table);
    const client = await this.pool.connect();
    try {
      await client.query("BEGIN");
      await client.query("SELECT pg_advisory_xact_lock(hashtext($1))", [this.table]);
      await client.query(`CREATE TABLE IF NOT EXISTS ${table} (id text COLLATE "C" PRIMARY KEY, doc jsonb NOT NULL, expires_at bigint)`);
      for (const [sqlName, declared] of this.indexNames) {
        const index = this.spec.indexes!.find((i) => i.name === declared)!;
        const unique = index.unique ? "UNIQUE " : "";
        await client.query(`CREATE ${unique}INDEX IF NOT EXISTS ${quoteIdentifier(sqlName)} ON ${table} (${fieldExpression(index.field)})`);
      }
      if (this.spec.ttl) {
        const ttlIndex = boundedIdentifier(`${this.table}_${this.spec.ttl.name}`);
        await client.query(`CREATE INDEX IF NOT EXISTS ${quoteIdentifier(ttlIndex)} ON ${table} (expires_at) WHERE expires_at IS NOT NULL`);
      }
      await client.query("COMMIT");
    } catch (error) {
      await client.query("ROLLBACK").catch(() => undefined); // the transaction's error is the one to report
      throw error;
    } finally {
      client.release();
    }
  }
}

function isUniqueViolation(error: unknown): error is { code: string; constraint?: string; detail?: string } {
  return typeof error === "object" && error !== null && (error as { code?: unknown }).code === uniqueViolation;
}

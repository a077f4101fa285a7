/**
 * One collection of the PostgreSQL document store: the table `doc_<name>` (see
 * postgres-document-store.ts), its expression indexes and TTL index, and the statements of the
 * collection port. A conditional write is one statement (`UPDATE … WHERE id = $1 AND rev = $2`),
 * so the check and the write cannot be separated.
 */
import { createHash } from "node:crypto";
import type pg from "pg";
import type { Clock } from "../../shared/clock.js";
import { assert } from "../../shared/errors.js";
import { assertCollectionName, assertFieldPath, assertValidFilter, assertValidFindOptions, getPath, toJsonDocument, ttlBaseMs } from "../document-query.js";
import type { Collection, CollectionSpec, Doc, Filter, FindOptions, Revisioned } from "../ports.js";
import { DuplicateKeyError, RevisionConflictError } from "../ports.js";
import { LEGACY_REVISION, newRevision } from "../revisions.js";
import type { PostgresPool } from "./postgres-pool.js";
import { fieldExpression, filterConditions, orderBy, quoteIdentifier, SqlParams } from "./sql-query.js";

const identifierBytesMax = 63;
const uniqueViolation = "23505";

/** An identifier of at most 63 bytes: `name`, or a prefix of it plus a hash when too long. */
function boundedIdentifier(name: string): string {
  if (Buffer.byteLength(name) <= identifierBytesMax) return name;
  const hash = createHash("sha256").update(name).digest("hex").slice(0, 12);
  return `${name.slice(0, identifierBytesMax - 13)}_${hash}`;
}

/** A collection of {@link PostgresDocumentStore}; obtained through its `collection()`. */
export class PostgresCollection<T extends Doc> implements Collection<T> {
  private readonly table: string;
  private readonly indexNames = new Map<string, string>(); // SQL index name → declared name
  private ready: Promise<void> | undefined;

  constructor(
    private readonly pool: PostgresPool,
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

  async insert(doc: T): Promise<string> {
    const stored = toJsonDocument(doc);
    await this.init();
    const table = quoteIdentifier(this.table);
    const rev = newRevision();
    // An expired row with the same id is logically absent: replace it.
    const sql =
      `INSERT INTO ${table} AS t (id, doc, expires_at, rev) VALUES ($1, $2, $3, $5) ` +
      `ON CONFLICT (id) DO UPDATE SET doc = EXCLUDED.doc, expires_at = EXCLUDED.expires_at, rev = EXCLUDED.rev ` +
      `WHERE t.expires_at IS NOT NULL AND t.expires_at <= $4`;
    const result = await this.writeRow(sql, [stored._id, JSON.stringify(stored), this.expiresAtMs(stored), this.nowMs(), rev]);
    if (result.rowCount === 0) throw new DuplicateKeyError(this.name, stored._id);
    return rev;
  }

  async put(doc: T): Promise<string> {
    const stored = toJsonDocument(doc);
    await this.init();
    const rev = newRevision();
    const sql =
      `INSERT INTO ${quoteIdentifier(this.table)} (id, doc, expires_at, rev) VALUES ($1, $2, $3, $4) ` +
      `ON CONFLICT (id) DO UPDATE SET doc = EXCLUDED.doc, expires_at = EXCLUDED.expires_at, rev = EXCLUDED.rev`;
    await this.writeRow(sql, [stored._id, JSON.stringify(stored), this.expiresAtMs(stored), rev]);
    return rev;
  }

  async putIf(doc: T, expectedRev: string): Promise<string> {
    const stored = toJsonDocument(doc);
    await this.init();
    const rev = newRevision();
    const sql =
      `UPDATE ${quoteIdentifier(this.table)} SET doc = $2, expires_at = $3, rev = $4 ` +
      `WHERE id = $1 AND rev = $5 AND (expires_at IS NULL OR expires_at > $6)`;
    const result = await this.writeRow(sql, [stored._id, JSON.stringify(stored), this.expiresAtMs(stored), rev, expectedRev, this.nowMs()]);
    if (result.rowCount === 0) throw new RevisionConflictError(this.name, stored._id, expectedRev);
    return rev;
  }

  async get(id: string): Promise<T | null> {
    return (await this.getRevisioned(id))?.doc ?? null;
  }

  async getRevisioned(id: string): Promise<Revisioned<T> | null> {
    await this.init();
    const result = await this.pool.query<{ doc: T; rev: string }>(
      `SELECT doc, rev FROM ${quoteIdentifier(this.table)} WHERE id = $1 AND (expires_at IS NULL OR expires_at > $2)`,
      [id, this.nowMs()],
    );
    const row = result.rows[0];
    return row ? { doc: row.doc, rev: row.rev } : null;
  }

  async delete(id: string): Promise<boolean> {
    await this.init();
    const result = await this.pool.query<{ live: boolean }>(
      `DELETE FROM ${quoteIdentifier(this.table)} WHERE id = $1 RETURNING (expires_at IS NULL OR expires_at > $2) AS live`,
      [id, this.nowMs()],
    );
    return result.rows[0]?.live === true;
  }

  async deleteIf(id: string, expectedRev: string): Promise<void> {
    await this.init();
    const result = await this.pool.query(`DELETE FROM ${quoteIdentifier(this.table)} WHERE id = $1 AND rev = $2 AND (expires_at IS NULL OR expires_at > $3)`, [
      id,
      expectedRev,
      this.nowMs(),
    ]);
    if (result.rowCount === 0) throw new RevisionConflictError(this.name, id, expectedRev);
  }

  async find(filter: Filter = {}, options: FindOptions = {}): Promise<T[]> {
    return (await this.select("doc", filter, options)).map((row) => row.doc);
  }

  async findRevisioned(filter: Filter = {}, options: FindOptions = {}): Promise<Revisioned<T>[]> {
    return (await this.select("doc, rev", filter, options)).map((row) => ({ doc: row.doc, rev: row.rev }));
  }

  private async select(columns: string, filter: Filter, options: FindOptions): Promise<{ doc: T; rev: string }[]> {
    assertValidFilter(filter);
    assertValidFindOptions(options);
    await this.init();
    const params = new SqlParams();
    let sql = `SELECT ${columns} FROM ${quoteIdentifier(this.table)} WHERE ${this.where(filter, params)} ORDER BY ${orderBy(options.sort)}`;
    if (options.limit !== undefined) sql += ` LIMIT ${params.add(options.limit)}`;
    if (options.skip) sql += ` OFFSET ${params.add(options.skip)}`;
    return (await this.pool.query<{ doc: T; rev: string }>(sql, params.values)).rows;
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
      // Tables created before documents had revisions: their rows read as the legacy revision.
      await client.query(`ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS rev text NOT NULL DEFAULT '${LEGACY_REVISION}'`);
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
      throw this.pool.clientFailed(error);
    } finally {
      client.release();
    }
  }
}

function isUniqueViolation(error: unknown): error is { code: string; constraint?: string; detail?: string } {
  return typeof error === "object" && error !== null && (error as { code?: unknown }).code === uniqueViolation;
}

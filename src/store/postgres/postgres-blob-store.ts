/**
 * PostgreSQL {@link BlobStore} for the production profile, so every controller sees the same
 * blobs: one table `(hash text COLLATE "C" PRIMARY KEY, data bytea NOT NULL)`. Reads check the
 * sha256 of what they return.
 */
import pg from "pg";
import { assert } from "../../shared/errors.js";
import { assertBlobIntact, isBlobHash, sha256Hex } from "../fs-blob-store.js";
import type { BlobStore } from "../ports.js";
import { quoteIdentifier } from "./sql-query.js";

/** Options of {@link openPostgresBlobStore}. */
export interface PostgresBlobStoreOptions {
  uri: string;
  /** Table name; default `blobs`. */
  table?: string;
  poolConnectionsMax?: number;
}

/** Connects, creates the table when missing and returns the store. */
export async function openPostgresBlobStore(options: PostgresBlobStoreOptions): Promise<PostgresBlobStore> {
  const table = options.table ?? "blobs";
  assert(/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(table), `invalid table name ${table}`);
  const pool = new pg.Pool({ connectionString: options.uri, max: options.poolConnectionsMax ?? 4 });
  pool.on("error", () => undefined); // idle-client errors surface on the next query instead
  try {
    await pool.query(`CREATE TABLE IF NOT EXISTS ${quoteIdentifier(table)} (hash text COLLATE "C" PRIMARY KEY, data bytea NOT NULL)`);
  } catch (error) {
    // Two controllers creating the table at once: one of them loses the race on the catalog.
    if (!["23505", "42P07"].includes(String((error as { code?: unknown }).code))) {
      await pool.end();
      throw error;
    }
  }
  return new PostgresBlobStore(pool, table);
}

/** The PostgreSQL blob store; create it with {@link openPostgresBlobStore}. */
export class PostgresBlobStore implements BlobStore {
  private readonly table: string;

  constructor(
    private readonly pool: pg.Pool,
    table: string,
  ) {
    this.table = quoteIdentifier(table);
  }

  async has(hash: string): Promise<boolean> {
    if (!isBlobHash(hash)) return false;
    const result = await this.pool.query(`SELECT 1 FROM ${this.table} WHERE hash = $1`, [hash]);
    return (result.rowCount ?? 0) > 0;
  }

  async put(data: Uint8Array): Promise<string> {
    const hash = sha256Hex(data);
    await this.pool.query(`INSERT INTO ${this.table} (hash, data) VALUES ($1, $2) ON CONFLICT (hash) DO NOTHING`, [hash, Buffer.from(data)]);
    return hash;
  }

  async get(hash: string): Promise<Uint8Array | null> {
    if (!isBlobHash(hash)) return null;
    const result = await this.pool.query<{ data: Buffer }>(`SELECT data FROM ${this.table} WHERE hash = $1`, [hash]);
    if (result.rows.length === 0) return null;
    const data = new Uint8Array(result.rows[0].data);
    assertBlobIntact(hash, data);
    return data;
  }

  async delete(hash: string): Promise<boolean> {
    if (!isBlobHash(hash)) return false;
    const result = await this.pool.query(`DELETE FROM ${this.table} WHERE hash = $1`, [hash]);
    return (result.rowCount ?? 0) > 0;
  }

  async list(): Promise<string[]> {
    const result = await this.pool.query<{ hash: string }>(`SELECT hash FROM ${this.table} ORDER BY hash`);
    return result.rows.map((row) => row.hash);
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}

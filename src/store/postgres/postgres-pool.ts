/**
 * The connections of the PostgreSQL adapter: one `pg` pool on the current server, chosen among the
 * hosts of the URI the way libpq does it.
 *
 * A URI may name several hosts, `postgres://user:secret@db1:5432,db2:5432/cloud?target_session_attrs=read-write`
 * (libpq's syntax; `pg` itself connects to the first host only). The hosts are tried in order; with
 * `target_session_attrs=read-write` (or `primary`) a server is taken only when `SHOW
 * transaction_read_only` says `off`, so a standby is passed over. When the current server stops
 * answering, or answers that it is read-only (it was demoted), the failing request answers
 * {@link StoreUnavailableError} and the next one looks for the writable server again: after a
 * failover of PostgreSQL (Patroni, repmgr, a manual promotion) the controllers follow within one
 * request.
 *
 * Every request is bounded: connecting (and waiting for a free connection) by
 * `connectTimeoutMs`, a query by `queryTimeoutMs`, so a frozen or unreachable server answers a
 * 503 within seconds instead of hanging. Long statements (imports, snapshot pages) pass their own
 * timeout.
 */
import pg from "pg";
import { assert } from "../../shared/errors.js";
import { StoreUnavailableError } from "../ports.js";

/** Options of {@link PostgresPool}. */
export interface PostgresPoolOptions {
  /** postgres:// or postgresql:// URI, one host or several separated by commas. */
  uri: string;
  poolConnectionsMax: number;
  /** How long connecting (or waiting for a free connection of a full pool) may take. */
  connectTimeoutMs: number;
  /** How long one query may take unless it passes its own timeout. */
  queryTimeoutMs: number;
}

/** One host of a multi-host URI, and the single-host URI `pg` is given for it. */
interface Candidate {
  address: string;
  uri: string;
}

/** The hosts of a PostgreSQL URI and whether only a writable server will do. */
export interface PostgresTarget {
  candidates: Candidate[];
  readWrite: boolean;
}

/** SQLSTATEs meaning the server is going away, starting, refusing connections, or read-only. */
const unavailableStates = new Set(["57P01", "57P02", "57P03", "53300", "25006"]);
/** Node socket errors of a server that cannot be reached. */
const unreachableCodes = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH", "ENOTFOUND", "EAI_AGAIN", "EPIPE"]);
const unreachableMessages =
  /Connection terminated|timeout exceeded when trying to connect|Query read timeout|Connection is closed|connection error|Client was closed/i;

/** Splits a (multi-host) URI into single-host URIs; `target_session_attrs` is read here and removed. */
export function parsePostgresUri(uri: string): PostgresTarget {
  const match = /^(postgres(?:ql)?:\/\/)([^@/?#]*@)?([^/?#]*)(\/[^?#]*)?(\?[^#]*)?$/i.exec(uri);
  if (!match) throw new Error("the PostgreSQL URI must look like postgres://[user[:password]@]host[:port][,host[:port]…]/database[?options]");
  const [, scheme, auth = "", hostList, path = "", query = ""] = match;
  const params = new URLSearchParams(query.slice(1));
  const attrs = (params.get("target_session_attrs") ?? "any").toLowerCase();
  if (!["any", "read-write", "primary"].includes(attrs)) {
    throw new Error(`target_session_attrs=${attrs} is not supported: use read-write (or primary) to connect to the writable server only, or leave it out`);
  }
  params.delete("target_session_attrs");
  const rest = `${path}${params.size > 0 ? `?${params.toString()}` : ""}`;
  const addresses = hostList.split(",").map((host) => host.trim());
  if (addresses.some((host) => host === "")) throw new Error("the PostgreSQL URI names an empty host");
  return { candidates: addresses.map((address) => ({ address, uri: `${scheme}${auth}${address}${rest}` })), readWrite: attrs !== "any" };
}

/** Whether `error` says the server cannot serve now (rather than that the statement is wrong). */
export function isUnavailable(error: unknown): boolean {
  if (error instanceof StoreUnavailableError) return true;
  if (typeof error !== "object" || error === null) return false;
  const { code, message } = error as { code?: unknown; message?: unknown };
  if (typeof code === "string" && (unreachableCodes.has(code) || unavailableStates.has(code) || code.startsWith("08"))) return true;
  return typeof message === "string" && unreachableMessages.test(message);
}

/** `error` as the adapter throws it: a StoreUnavailableError when the server cannot serve, else unchanged. */
export function storeError(error: unknown): unknown {
  return isUnavailable(error) && !(error instanceof StoreUnavailableError) ? new StoreUnavailableError("document", error) : error;
}

/** The pool of the current server; see the module comment. */
export class PostgresPool {
  private readonly target: PostgresTarget;
  private current: { pool: pg.Pool; candidate: number } | null = null;
  private choosing: Promise<pg.Pool> | null = null;
  private preferred = 0;
  private ended = false;

  constructor(private readonly options: PostgresPoolOptions) {
    this.target = parsePostgresUri(options.uri);
    assert(options.connectTimeoutMs > 0 && options.queryTimeoutMs > 0, "PostgreSQL timeouts must be positive");
  }

  /** Runs one statement on a pooled connection. */
  async query<R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values?: unknown[], timeoutMs?: number): Promise<pg.QueryResult<R>> {
    const pool = await this.pool();
    try {
      return await pool.query<R>({ text, values, query_timeout: timeoutMs ?? this.options.queryTimeoutMs } as pg.QueryConfig);
    } catch (error) {
      throw this.failed(pool, error);
    }
  }

  /** A connection of its own (transactions); release it when done. */
  async connect(): Promise<pg.PoolClient> {
    const pool = await this.pool();
    try {
      return await pool.connect();
    } catch (error) {
      throw this.failed(pool, error);
    }
  }

  /** Maps an error of a connection taken with {@link connect}, giving the server up when it failed. */
  clientFailed(error: unknown): unknown {
    return this.current ? this.failed(this.current.pool, error) : storeError(error);
  }

  async end(): Promise<void> {
    this.ended = true;
    const current = this.current;
    this.current = null;
    await current?.pool.end();
  }

  /** The current pool, or a new one on the server found now. */
  private pool(): Promise<pg.Pool> {
    assert(!this.ended, "document store is closed");
    if (this.current) return Promise.resolve(this.current.pool);
    this.choosing ??= this.choose().finally(() => (this.choosing = null));
    return this.choosing;
  }

  /** Tries the hosts in order, starting with the last one that served. */
  private async choose(): Promise<pg.Pool> {
    const { candidates } = this.target;
    const reasons: string[] = [];
    for (let n = 0; n < candidates.length; n++) {
      const index = (this.preferred + n) % candidates.length;
      const reason = await this.probe(candidates[index]);
      if (reason !== null) {
        reasons.push(`${candidates[index].address}: ${reason}`);
        continue;
      }
      const pool = new pg.Pool({
        connectionString: candidates[index].uri,
        max: this.options.poolConnectionsMax,
        connectionTimeoutMillis: this.options.connectTimeoutMs,
      });
      pool.on("error", () => undefined); // idle-client errors surface on the next query instead
      if (this.ended) {
        await pool.end();
        assert(false, "document store is closed");
      }
      this.preferred = index;
      this.current = { pool, candidate: index };
      return pool;
    }
    throw new StoreUnavailableError("document", new Error(`no usable PostgreSQL server (${reasons.join("; ")})`));
  }

  /** Null when the host will do; else why not. One host without read-write is taken untried (its first query tells). */
  private async probe(candidate: Candidate): Promise<string | null> {
    if (this.target.candidates.length === 1 && !this.target.readWrite) return null;
    const client = new pg.Client({ connectionString: candidate.uri, connectionTimeoutMillis: this.options.connectTimeoutMs });
    client.on("error", () => undefined);
    try {
      await client.connect();
      if (!this.target.readWrite) return null;
      const result = await client.query<{ transaction_read_only: string }>({
        text: "SHOW transaction_read_only",
        query_timeout: this.options.queryTimeoutMs,
      } as pg.QueryConfig);
      return result.rows[0]?.transaction_read_only === "off" ? null : "read-only";
    } catch (error) {
      return error instanceof Error ? error.message : String(error);
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  /** A failed server is given up (the next request chooses again); answers the error to throw. */
  private failed(pool: pg.Pool, error: unknown): unknown {
    if (!isUnavailable(error)) return error;
    if (this.current?.pool === pool) {
      this.current = null;
      // Connections still out finish (or fail) on their own; the pool ends once they are back.
      void pool.end().catch(() => undefined);
    }
    return storeError(error);
  }
}

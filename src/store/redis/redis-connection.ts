/**
 * How the Redis key-value store connects, and what counts as an outage.
 *
 * URIs: `redis://[[user]:password@]host[:port][/db]` and `rediss://…` (TLS) connect to one server;
 * `redis-sentinel://[[user]:password@]sentinel1:26379,sentinel2:26379,…/<master name>[/db]` (or
 * `rediss-sentinel://` for TLS to the data nodes) asks the Sentinels which server is the master and
 * follows it when they promote a replica (ioredis `sentinels`, with its failover detector). Query
 * options of the Sentinel form: `sentinelPassword`, `sentinelUsername` (when the Sentinels have
 * their own credentials).
 *
 * Outages: each command waits `commandTimeoutMs` at most (a frozen server or a half-open
 * connection), fails after `commandRetriesMax` reconnection attempts while disconnected instead of
 * queueing without bound, and a write refused with READONLY (a master demoted under the client)
 * reconnects to the current master and is sent again. What still fails becomes
 * {@link StoreUnavailableError}: a request answers 503 STORE_UNAVAILABLE within seconds.
 */
import type { RedisOptions } from "ioredis";
import { AssertionError } from "../../shared/errors.js";
import { StoreUnavailableError } from "../ports.js";

/** Reply errors of a server that cannot serve now (as opposed to a wrong command). */
const unavailableReplies = /^(READONLY|LOADING|MASTERDOWN|CLUSTERDOWN|TRYAGAIN|NOREPLICAS|BUSY|NOTREADY)\b/;

/** The connection settings every Redis connection of the store uses. */
export interface RedisConnectionSettings {
  commandRetriesMax: number;
  connectTimeoutMs: number;
  commandTimeoutMs: number;
}

/** ioredis options for `uri` (see the module comment); a plain redis:// URI is passed to ioredis as it is. */
export function redisConnection(uri: string, settings: RedisConnectionSettings): { uri: string | null; options: RedisOptions } {
  const options: RedisOptions = {
    lazyConnect: true,
    maxRetriesPerRequest: settings.commandRetriesMax,
    connectTimeout: settings.connectTimeoutMs,
    commandTimeout: settings.commandTimeoutMs,
    // A demoted master answers writes with READONLY: reconnect (to the new master) and send again.
    reconnectOnError: (error) => (error.message.startsWith("READONLY") ? 2 : false),
  };
  const sentinel = /^(rediss?)-sentinel:\/\/(.*)$/i.exec(uri);
  if (!sentinel) return { uri, options };
  return { uri: null, options: { ...options, ...sentinelOptions(sentinel[1].toLowerCase() === "rediss", sentinel[2], settings) } };
}

function sentinelOptions(tls: boolean, rest: string, settings: RedisConnectionSettings): RedisOptions {
  const match = /^(?:([^@/]*)@)?([^/?#]+)\/([^/?#]+)(?:\/(\d+))?(?:\?([^#]*))?$/.exec(rest);
  if (!match) throw new Error("a Sentinel URI looks like redis-sentinel://[[user]:password@]host:port[,host:port…]/<master name>[/db]");
  const [, auth, hostList, masterName, db, query] = match;
  const params = new URLSearchParams(query ?? "");
  const [username, password] = auth ? splitCredentials(auth) : [undefined, undefined];
  const sentinels = hostList.split(",").map(parseAddress);
  return {
    sentinels,
    name: decodeURIComponent(masterName),
    ...(username ? { username } : {}),
    ...(password ? { password } : {}),
    ...(db ? { db: Number(db) } : {}),
    ...(params.get("sentinelUsername") ? { sentinelUsername: params.get("sentinelUsername")! } : {}),
    ...(params.get("sentinelPassword") ? { sentinelPassword: params.get("sentinelPassword")! } : {}),
    ...(tls ? { tls: {} } : {}),
    sentinelCommandTimeout: settings.commandTimeoutMs,
    // Learns a promotion from the Sentinels' +switch-master at once instead of at the next failed command.
    failoverDetector: true,
  };
}

function splitCredentials(auth: string): [string | undefined, string | undefined] {
  const colon = auth.indexOf(":");
  if (colon < 0) return [decodeURIComponent(auth) || undefined, undefined];
  return [decodeURIComponent(auth.slice(0, colon)) || undefined, decodeURIComponent(auth.slice(colon + 1)) || undefined];
}

function parseAddress(address: string): { host: string; port: number } {
  const match = /^\s*(?:\[([^\]]+)\]|([^:\s]+))(?::(\d+))?\s*$/.exec(address);
  if (!match) throw new Error(`bad Sentinel address "${address}": expected host:port`);
  const port = match[3] ? Number(match[3]) : 26379;
  if (port < 1 || port > 65535) throw new Error(`bad Sentinel port in "${address}"`);
  return { host: match[1] ?? match[2], port };
}

/** `error` as the store throws it: a StoreUnavailableError when Redis cannot serve now, else unchanged. */
export function redisStoreError(error: unknown): unknown {
  if (!(error instanceof Error) || error instanceof StoreUnavailableError || error instanceof AssertionError) return error;
  // A ReplyError is Redis answering; anything else is the connection (closed, timed out, retries exhausted).
  const answered = error.name === "ReplyError";
  return !answered || unavailableReplies.test(error.message) ? new StoreUnavailableError("key-value", error) : error;
}

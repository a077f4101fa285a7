/**
 * Redis {@link KvStore} (ioredis) for the production profile, shared by every controller.
 *
 * setIfAbsent is `SET NX PX`; compareAndSet, compareAndDelete and take are Lua scripts, so each
 * check-and-write is one atomic step on the server; increment is INCR (it keeps the expiry);
 * appendSequenced is one Lua script (INCR, RPUSH, LTRIM, PUBLISH) and readSequenced another (GET
 * and LRANGE), so a sequenced log never shows a number without its entry; ttlMs is PTTL; keys walks SCAN (never KEYS, which blocks the server) with the prefix escaped
 * for MATCH. Pub/sub needs a connection in subscriber mode, so it runs on a duplicate connection
 * opened on the first subscribe. Connecting (one server or through Redis Sentinel) and what an
 * outage looks like: redis-connection.ts.
 */
import { Redis } from "ioredis";
import { assert } from "../../shared/errors.js";
import { parseSequencedEntry, type KvStore, type SequencedEntry, type SequencedLog } from "../ports.js";
import { redisConnection, redisStoreError } from "./redis-connection.js";

/** Options of {@link openRedisKvStore}. */
export interface RedisKvStoreOptions {
  /** redis://, rediss://, redis-sentinel:// or rediss-sentinel:// URI (redis-connection.ts). */
  uri: string;
  /** Attempts per command while reconnecting, after which the command fails instead of waiting. */
  commandRetriesMax?: number;
  connectTimeoutMs?: number;
  /** How long one command may wait for its answer. Default 2 s. */
  commandTimeoutMs?: number;
  /** Connection errors and throwing subscribers are reported here; the default ignores them. */
  onError?: (error: unknown) => void;
}

/** Keys fetched per SCAN round trip. */
const scanCountHint = 500;
/** SCAN rounds per keys() call; bounds the work of one call on a huge keyspace. */
const scanRoundsMax = 100_000;

const compareAndSetScript = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  if ARGV[3] == '' then
    redis.call('SET', KEYS[1], ARGV[2])
  else
    redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  end
  return 1
end
return 0`;

const compareAndDeleteScript = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`;

const takeScript = `
local value = redis.call('GET', KEYS[1])
if value then redis.call('DEL', KEYS[1]) end
return value`;

// KEYS: counter, list. ARGV: value, entriesMax, channel. Entries are "<sequence> <value>".
const appendSequencedScript = `
local sequence = redis.call('INCR', KEYS[1])
local entry = string.format('%d', sequence) .. ' ' .. ARGV[1]
redis.call('RPUSH', KEYS[2], entry)
redis.call('LTRIM', KEYS[2], -tonumber(ARGV[2]), -1)
redis.call('PUBLISH', ARGV[3], entry)
return sequence`;

// KEYS: counter, list. ARGV: fromSequence. Every append pushes its own number, so the list holds
// consecutive numbers ending at the counter and the wanted tail is the last (latest - from + 1).
const readSequencedScript = `
local latest = tonumber(redis.call('GET', KEYS[1]) or '0')
local count = latest - tonumber(ARGV[1]) + 1
if count <= 0 then return {latest, {}} end
return {latest, redis.call('LRANGE', KEYS[2], -count, -1)}`;

interface ScriptedRedis extends Redis {
  kvAppendSequenced(counterKey: string, listKey: string, value: string, entriesMax: string, channel: string): Promise<number>;
  kvReadSequenced(counterKey: string, listKey: string, fromSequence: string): Promise<[number, string[]]>;
  kvCompareAndSet(key: string, expected: string, value: string, ttlMs: string): Promise<number>;
  kvCompareAndDelete(key: string, expected: string): Promise<number>;
  kvTake(key: string): Promise<string | null>;
}

/** Connects to Redis; fails when it is unreachable. */
export async function openRedisKvStore(options: RedisKvStoreOptions): Promise<RedisKvStore> {
  const connection = redisConnection(options.uri, {
    commandRetriesMax: options.commandRetriesMax ?? 3,
    connectTimeoutMs: options.connectTimeoutMs ?? 5_000,
    commandTimeoutMs: options.commandTimeoutMs ?? 2_000,
  });
  const client = connection.uri === null ? new Redis(connection.options) : new Redis(connection.uri, connection.options);
  const onError = options.onError ?? (() => undefined);
  client.on("error", onError);
  try {
    await client.connect();
    await client.ping();
  } catch (error) {
    client.disconnect();
    throw error;
  }
  return new RedisKvStore(client, onError);
}

function ttlArgument(ttlMs: number | undefined): string {
  if (ttlMs === undefined) return "";
  assert(Number.isFinite(ttlMs) && ttlMs > 0, "ttlMs must be a positive number");
  return String(Math.ceil(ttlMs));
}

/** Escapes glob characters so a prefix matches literally in SCAN MATCH. */
function escapeGlob(text: string): string {
  return text.replace(/[\\*?[\]]/g, (ch) => `\\${ch}`);
}

/** The Redis key-value store; create it with {@link openRedisKvStore}. */
export class RedisKvStore implements KvStore {
  private readonly client: ScriptedRedis;
  private subscriber: Redis | undefined;
  private readonly handlers = new Map<string, Set<(message: string) => void>>();
  private closed = false;

  constructor(
    client: Redis,
    private readonly onError: (error: unknown) => void,
  ) {
    client.defineCommand("kvCompareAndSet", { numberOfKeys: 1, lua: compareAndSetScript });
    client.defineCommand("kvCompareAndDelete", { numberOfKeys: 1, lua: compareAndDeleteScript });
    client.defineCommand("kvTake", { numberOfKeys: 1, lua: takeScript });
    client.defineCommand("kvAppendSequenced", { numberOfKeys: 2, lua: appendSequencedScript });
    client.defineCommand("kvReadSequenced", { numberOfKeys: 2, lua: readSequencedScript });
    this.client = client as ScriptedRedis;
  }

  async get(key: string): Promise<string | null> {
    return this.run(() => this.client.get(key));
  }

  async set(key: string, value: string, options?: { ttlMs?: number }): Promise<void> {
    const ttl = ttlArgument(options?.ttlMs);
    await this.run(() => (ttl === "" ? this.client.set(key, value) : this.client.set(key, value, "PX", ttl)));
  }

  async setIfAbsent(key: string, value: string, options?: { ttlMs?: number }): Promise<boolean> {
    const ttl = ttlArgument(options?.ttlMs);
    const reply = await this.run(() => (ttl === "" ? this.client.set(key, value, "NX") : this.client.set(key, value, "PX", ttl, "NX")));
    return reply === "OK";
  }

  async compareAndSet(key: string, expected: string, value: string, options?: { ttlMs?: number }): Promise<boolean> {
    const ttl = ttlArgument(options?.ttlMs);
    return (await this.run(() => this.client.kvCompareAndSet(key, expected, value, ttl))) === 1;
  }

  async compareAndDelete(key: string, expected: string): Promise<boolean> {
    return (await this.run(() => this.client.kvCompareAndDelete(key, expected))) === 1;
  }

  async delete(key: string): Promise<boolean> {
    return (await this.run(() => this.client.del(key))) === 1;
  }

  async increment(key: string): Promise<number> {
    return this.run(() => this.client.incr(key));
  }

  async take(key: string): Promise<string | null> {
    return this.run(() => this.client.kvTake(key));
  }

  async ttlMs(key: string): Promise<number | null> {
    const remaining = await this.run(() => this.client.pttl(key));
    return remaining < 0 ? null : remaining; // -2: absent, -1: no expiry
  }

  async keys(prefix: string): Promise<string[]> {
    const found = new Set<string>(); // SCAN may return a key more than once
    let cursor = "0";
    for (let round = 0; round < scanRoundsMax; round++) {
      const [next, batch] = await this.run(() => this.client.scan(cursor, "MATCH", `${escapeGlob(prefix)}*`, "COUNT", scanCountHint));
      for (const key of batch) found.add(key);
      cursor = next;
      if (cursor === "0") return [...found].sort();
    }
    throw new Error(`keys(${prefix}) did not finish within ${scanRoundsMax} SCAN rounds`);
  }

  async publish(channel: string, message: string): Promise<void> {
    await this.run(() => this.client.publish(channel, message));
  }

  async appendSequenced(log: SequencedLog, value: string): Promise<number> {
    assert(Number.isSafeInteger(log.entriesMax) && log.entriesMax > 0, "entriesMax must be a positive integer");
    return Number(await this.run(() => this.client.kvAppendSequenced(log.counterKey, log.listKey, value, String(log.entriesMax), log.channel)));
  }

  async readSequenced(log: SequencedLog, fromSequence: number): Promise<{ latestSequence: number; entries: SequencedEntry[] }> {
    assert(Number.isSafeInteger(fromSequence) && fromSequence >= 0, "fromSequence must be a non-negative integer");
    const [latest, raw] = await this.run(() => this.client.kvReadSequenced(log.counterKey, log.listKey, String(Math.max(fromSequence, 1))));
    const entries: SequencedEntry[] = [];
    for (const text of raw) {
      const entry = parseSequencedEntry(text);
      if (entry && entry.sequence >= fromSequence) entries.push(entry);
    }
    return { latestSequence: Number(latest), entries };
  }

  async subscribe(channel: string, handler: (message: string) => void): Promise<() => Promise<void>> {
    assert(!this.closed, "key-value store is closed");
    const subscriber = this.subscriberConnection();
    const subscription = (message: string) => handler(message);
    let set = this.handlers.get(channel);
    if (!set) {
      set = new Set();
      this.handlers.set(channel, set);
    }
    set.add(subscription);
    const firstOnChannel = set.size === 1;
    if (firstOnChannel) {
      try {
        await this.run(() => subscriber.subscribe(channel));
      } catch (error) {
        this.handlers.delete(channel);
        throw error;
      }
    }
    return async () => {
      const current = this.handlers.get(channel);
      if (!current?.delete(subscription)) return;
      if (current.size === 0) {
        this.handlers.delete(channel);
        if (!this.closed) await this.run(() => subscriber.unsubscribe(channel));
      }
    };
  }

  async ping(): Promise<void> {
    await this.run(() => this.client.ping());
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.handlers.clear();
    await Promise.all([quit(this.client), this.subscriber ? quit(this.subscriber) : undefined]);
  }

  /** One command; an outage becomes StoreUnavailableError (redis-connection.ts). */
  private async run<R>(command: () => Promise<R>): Promise<R> {
    try {
      return await command();
    } catch (error) {
      throw redisStoreError(error);
    }
  }

  private subscriberConnection(): Redis {
    if (this.subscriber) return this.subscriber;
    const subscriber = this.client.duplicate();
    subscriber.on("error", this.onError);
    subscriber.on("message", (channel: string, message: string) => {
      for (const handler of [...(this.handlers.get(channel) ?? [])]) {
        try {
          handler(message);
        } catch (error) {
          this.onError(error);
        }
      }
    });
    this.subscriber = subscriber;
    return subscriber;
  }
}

async function quit(connection: Redis): Promise<void> {
  try {
    await connection.quit();
  } catch {
    // The connection is already broken: closing it hard is all that is left to do.
  } finally {
    // Also closes what QUIT leaves open: through Sentinel, the failover detector's connections to
    // the Sentinels (they would reconnect for ever once the Sentinels are gone).
    connection.disconnect();
  }
}

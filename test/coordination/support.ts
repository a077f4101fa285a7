/**
 * Test support for the coordination tests: every suite runs once over the in-memory key-value store
 * (expiry on a manual clock) and once over a real redis-server started for the test file (expiry on
 * the server's clock, so the Redis variant waits short TTLs out);
 * the code under test gets the fake clock's timers.
 */
import { after, before, describe } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { randomBytes } from "node:crypto";
import type { Logger } from "../../src/logs/types.js";
import { FakeClock } from "../support/fake-clock.js";
import { MemoryKvStore } from "../../src/store/memory/memory-kv-store.js";
import type { KvStore } from "../../src/store/ports.js";
import { openRedisKvStore } from "../../src/store/redis/redis-kv-store.js";
import { startRedisServer, type RedisServer } from "../support/redis-server.js";

/** One test's view of a key-value backend. */
export interface KvEnvironment {
  readonly backend: "memory" | "redis";
  /** Injected time of the code under test; with memory it is also the store's expiry clock. */
  readonly clock: FakeClock;
  /** A connection to the shared store, as one controller would open it. */
  connect(): Promise<KvStore>;
  /** Lets `ms` pass for the store's expiry (and moves the clock by as much). */
  expire(ms: number): Promise<void>;
  /** A name unique to this test, for keys and resources. */
  unique(prefix: string): string;
  /** Closes every connection. */
  dispose(): Promise<void>;
}

const START_MS = Date.parse("2026-06-01T00:00:00Z");

/**
 * Declares `body` twice: under "<title> (memory)" and "<title> (redis)". `env()` makes the
 * environment of one test; the caller disposes it (see {@link withEnv}).
 */
export function describeEachKv(title: string, body: (env: () => Promise<KvEnvironment>) => void): void {
  describe(`${title} (memory)`, () => {
    body(async () => {
      const clock = new FakeClock(START_MS);
      const store = new MemoryKvStore({ clock });
      return {
        backend: "memory",
        clock,
        connect: async () => store,
        expire: async (ms) => clock.advance(ms),
        unique: (prefix) => `${prefix}-${randomBytes(4).toString("hex")}`,
        dispose: () => store.close(),
      };
    });
  });

  describe(`${title} (redis)`, () => {
    let server: RedisServer | undefined;
    before(async () => {
      server = await startRedisServer();
    });
    after(async () => {
      await server?.stop();
    });
    body(async () => {
      const clock = new FakeClock(START_MS);
      const connections: KvStore[] = [];
      return {
        backend: "redis",
        clock,
        connect: async () => {
          const store = await openRedisKvStore({ uri: server!.uri });
          connections.push(store);
          return store;
        },
        expire: async (ms) => {
          clock.advance(ms);
          await sleep(ms);
        },
        unique: (prefix) => `${prefix}-${randomBytes(4).toString("hex")}`,
        dispose: async () => {
          await Promise.all(connections.map((store) => store.close()));
        },
      };
    });
  });
}

/** Runs `test` with a fresh environment and always disposes it. */
export async function withEnv(makeEnv: () => Promise<KvEnvironment>, test: (env: KvEnvironment) => Promise<void>): Promise<void> {
  const env = await makeEnv();
  try {
    await test(env);
  } finally {
    await env.dispose();
  }
}

/** A logger that keeps its records for assertions. */
export function recordingLogger(name = "cloud.coordination.test"): { logger: Logger; records: { level: string; message: string }[] } {
  const records: { level: string; message: string }[] = [];
  const at = (level: string) => (message: string) => {
    records.push({ level, message });
  };
  return { logger: { name, trace: at("TRACE"), debug: at("DEBUG"), info: at("INFO"), warn: at("WARN"), error: at("ERROR") }, records };
}

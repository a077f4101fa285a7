/**
 * Adapter selection for the composition root. Documents: a `mongodb://`/`mongodb+srv://` URI opens
 * MongoDB, a `postgres://`/`postgresql://` URI opens PostgreSQL, and without a URI the development
 * profile opens the embedded store under `<dataDir>/documents` (production requires a URI).
 * Key-value: memory without a URI, Redis for `redis://`/`rediss://`, Redis through Sentinel for
 * `redis-sentinel://`/`rediss-sentinel://` (redis/redis-connection.ts). Blobs live in the document
 * database when it is shared (a PostgreSQL table, or GridFS on MongoDB), otherwise in files under
 * `<dataDir>/blobs`.
 */
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import type { Clock } from "../shared/clock.js";
import { openLevelDocumentStore } from "./embedded/level-document-store.js";
import { openFsBlobStore } from "./fs-blob-store.js";
import { MemoryKvStore } from "./memory/memory-kv-store.js";
import { openMongoBlobStore } from "./mongo/mongo-blob-store.js";
import { openMongoDocumentStore } from "./mongo/mongo-document-store.js";
import type { BlobStore, DocumentStore, KvStore } from "./ports.js";
import { openPostgresBlobStore } from "./postgres/postgres-blob-store.js";
import { openPostgresDocumentStore } from "./postgres/postgres-document-store.js";
import { openRedisKvStore } from "./redis/redis-kv-store.js";

/** Runtime profile, as in controller.yml `runtime.profile`. */
export type StoreProfile = "development" | "production";

/** Options of {@link openDocumentStore}. */
export interface OpenDocumentStoreOptions {
  profile: StoreProfile;
  /** Data directory (`data.dir`); the embedded store lives in `<dataDir>/documents`. */
  dataDir: string;
  /** Document database URI; its scheme picks the adapter. */
  uri?: string;
  clock?: Clock;
  /** TTL sweep interval of the embedded and PostgreSQL adapters (MongoDB expires by itself). */
  ttlSweepIntervalMs?: number;
}

/** Options of {@link openKvStore}. */
export interface OpenKvStoreOptions {
  /** `redis://`, `rediss://`, `redis-sentinel://` or `rediss-sentinel://`; absent: an in-memory store for a single controller. */
  uri?: string;
  clock?: Clock;
  /** Connection errors of the Redis client. */
  onError?: (error: unknown) => void;
}

/** Options of {@link openBlobStore}. */
export interface OpenBlobStoreOptions {
  profile: StoreProfile;
  dataDir: string;
  /** The document database URI: blobs go to the same database when there is one. */
  uri?: string;
}

/** A blob store the composition root closes on shutdown. */
export type ClosableBlobStore = BlobStore & { close(): Promise<void> };

/** The scheme of a URI, lower case (`postgres`, `mongodb+srv`, …), or undefined. */
export function uriScheme(uri: string): string | undefined {
  return /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(uri)?.[1]?.toLowerCase();
}

/** Opens the document store for the profile and URI (see the module comment). */
export async function openDocumentStore(options: OpenDocumentStoreOptions): Promise<DocumentStore> {
  if (options.uri) {
    const scheme = uriScheme(options.uri);
    if (scheme === "mongodb" || scheme === "mongodb+srv") return openMongoDocumentStore({ uri: options.uri, clock: options.clock });
    if (scheme === "postgres" || scheme === "postgresql") {
      return openPostgresDocumentStore({ uri: options.uri, clock: options.clock, ttlSweepIntervalMs: options.ttlSweepIntervalMs });
    }
    throw new Error(`unsupported document database URI scheme "${scheme ?? ""}": use mongodb://, mongodb+srv://, postgres:// or postgresql://`);
  }
  if (options.profile === "production") {
    throw new Error("the production profile needs a shared document database: set a mongodb:// or postgres:// URI");
  }
  const directory = join(options.dataDir, "documents");
  await mkdir(directory, { recursive: true });
  return openLevelDocumentStore({ directory, clock: options.clock, ttlSweepIntervalMs: options.ttlSweepIntervalMs });
}

/** Opens the key-value store: memory without a URI, Redis otherwise. */
export async function openKvStore(options: OpenKvStoreOptions = {}): Promise<KvStore> {
  if (!options.uri) return new MemoryKvStore({ clock: options.clock });
  const scheme = uriScheme(options.uri);
  if (scheme === "redis" || scheme === "rediss" || scheme === "redis-sentinel" || scheme === "rediss-sentinel") {
    return openRedisKvStore({ uri: options.uri, onError: options.onError });
  }
  throw new Error(`unsupported key-value store URI scheme "${scheme ?? ""}": use redis://, rediss://, redis-sentinel:// or rediss-sentinel://`);
}

/** Opens the blob store: in the document database when there is one, else `<dataDir>/blobs`. */
export async function openBlobStore(options: OpenBlobStoreOptions): Promise<ClosableBlobStore> {
  const scheme = options.uri ? uriScheme(options.uri) : undefined;
  if (options.uri && (scheme === "postgres" || scheme === "postgresql")) return openPostgresBlobStore({ uri: options.uri });
  if (options.uri && (scheme === "mongodb" || scheme === "mongodb+srv")) return openMongoBlobStore({ uri: options.uri });
  return openFsBlobStore(join(options.dataDir, "blobs"));
}

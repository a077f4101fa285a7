/**
 * Opens the controller's stores through the store factory (`src/store/open.ts`): the document store
 * chosen by profile and `database.uri`, the key-value store (in memory on the development profile,
 * `kvstore.uri` in production) and the blob store.
 */
import { resolve } from "node:path";
import type { ControllerConfig } from "../config/schema.js";
import { PINNED_LOGGERS } from "../logs/logger.js";
import type { LogService } from "../logs/types.js";
import type { Clock } from "../shared/clock.js";
import { openBlobStore, openDocumentStore, openKvStore } from "../store/open.js";
import type { BlobStore, DocumentStore, KvStore } from "../store/ports.js";

/** The stores the composition root hands to services. */
export interface ControllerStores {
  documents: DocumentStore;
  kv: KvStore;
  blobs: BlobStore;
  /** Closes every store that was opened, in reverse order; never throws. */
  close(): Promise<void>;
}

/** Store settings that are not configuration keys. */
export interface StoreTuning {
  /** How often the document store deletes expired documents; 0 turns the sweep off (expiry is still checked on read). The store's default otherwise. */
  ttlSweepIntervalMs?: number;
  /** A key-value store to use instead of opening one (controllers of one test sharing a Redis); it is not closed here. */
  kv?: KvStore;
}

/** Opens the stores for `config`; on failure closes what was already opened and rethrows. */
export async function openControllerStores(config: ControllerConfig, logs: LogService, clock?: Clock, tuning: StoreTuning = {}): Promise<ControllerStores> {
  const log = logs.logger("cloud.controller.stores");
  const redisLog = logs.logger(PINNED_LOGGERS.redis);
  const profile = config.runtime.profile;
  const dataDir = resolve(config.data.dir);
  const opened: { name: string; close(): Promise<void> }[] = [];
  const closeAll = async () => {
    for (const store of opened.reverse()) {
      try {
        await store.close();
      } catch (err) {
        log.warn(`Closing the ${store.name} failed`, err);
      }
    }
    opened.length = 0;
  };
  try {
    const documents = await openDocumentStore({ profile, dataDir, uri: config.database.uri, clock, ttlSweepIntervalMs: tuning.ttlSweepIntervalMs });
    opened.push({ name: "document store", close: () => documents.close() });
    // Development keeps leases, tickets and sessions in process memory; production shares them.
    const kv =
      tuning.kv ??
      (await openKvStore({
        uri: profile === "production" ? config.kvstore.uri : undefined,
        clock,
        onError: (err) => redisLog.warn("Redis client error", err),
      }));
    if (!tuning.kv) opened.push({ name: "key-value store", close: () => kv.close() });
    const blobs = await openBlobStore({ profile, dataDir, uri: config.database.uri });
    opened.push({ name: "blob store", close: () => blobs.close() });
    log.info(`Stores open: profile ${profile}, data directory ${dataDir}`);
    return { documents, kv, blobs, close: closeAll };
  } catch (err) {
    await closeAll();
    throw err;
  }
}

/**
 * Opens the controller's stores through the store factory (`src/store/open.ts`): the document store
 * chosen by profile and `database.uri`, the key-value store (in memory on the development profile,
 * `kvstore.uri` in production) and the blob store under the data directory.
 */
import { join, resolve } from "node:path";
import type { ControllerConfig } from "../config/schema.js";
import type { LogService } from "../logs/types.js";
import { openLevelDocumentStore } from "../store/embedded/level-document-store.js";
import { MemoryKvStore } from "../store/memory/memory-kv-store.js";
import type { BlobStore, DocumentStore, KvStore } from "../store/ports.js";

/** The stores the composition root hands to services. */
export interface ControllerStores {
  documents: DocumentStore;
  kv: KvStore;
  blobs: BlobStore | null;
  /** Closes every store that was opened, in reverse order; never throws. */
  close(): Promise<void>;
}

/** The factory functions `src/store/open.ts` exports. */
interface StoreFactory {
  openDocumentStore(options: { profile: string; dataDir: string; uri?: string }): Promise<DocumentStore>;
  openKvStore(options: { uri?: string; profile?: string }): Promise<KvStore>;
  openBlobStore?(options: { profile?: string; dataDir: string; uri?: string; documents?: DocumentStore }): Promise<BlobStore>;
}

/** Where the store factory lives, relative to this module. */
const STORE_FACTORY_MODULE = "../store/open.js";

/** Opens the stores for `config`; on failure closes what was already opened and rethrows. */
export async function openControllerStores(config: ControllerConfig, logs: LogService): Promise<ControllerStores> {
  const log = logs.logger("cloud.controller.stores");
  const factory = await loadStoreFactory(config, log);
  const profile = config.runtime.profile;
  const dataDir = resolve(config.data.dir);
  const opened: { name: string; close(): Promise<void> }[] = [];
  try {
    const documents = await factory.openDocumentStore({ profile, dataDir, uri: config.database.uri });
    opened.push({ name: "document store", close: () => documents.close() });
    // Development keeps leases, tickets and sessions in process memory; production shares them.
    const kv = await factory.openKvStore({ profile, uri: profile === "production" ? config.kvstore.uri : undefined });
    opened.push({ name: "key-value store", close: () => kv.close() });
    const blobs = factory.openBlobStore
      ? await factory.openBlobStore({ profile, dataDir: join(dataDir, "blobs"), uri: config.database.uri, documents })
      : null;
    log.info(`Stores open: profile ${profile}, data directory ${dataDir}`);
    return {
      documents,
      kv,
      blobs,
      close: async () => {
        for (const store of opened.reverse()) {
          try {
            await store.close();
          } catch (err) {
            log.warn(`Closing the ${store.name} failed`, err);
          }
        }
      },
    };
  } catch (err) {
    for (const store of opened.reverse()) await store.close().catch(() => undefined);
    throw err;
  }
}

function isModuleNotFound(err: unknown): boolean {
  // Only the factory module itself missing, not one of its imports.
  return err instanceof Error && (err as { code?: unknown }).code === "ERR_MODULE_NOT_FOUND" && /store[\\/]open\.(js|ts)/.test(err.message);
}

/**
 * The store factory module. Interim: while `src/store/open.ts` is not in the tree, the development
 * profile opens the embedded store and the in-memory key-value store directly; production needs it.
 */
async function loadStoreFactory(config: ControllerConfig, log: { warn(message: string): void }): Promise<StoreFactory> {
  try {
    return (await import(STORE_FACTORY_MODULE)) as StoreFactory;
  } catch (err) {
    if (!isModuleNotFound(err) || config.runtime.profile !== "development") throw err;
    log.warn("Store factory not available; opening the embedded document store and the in-memory key-value store directly");
    return {
      openDocumentStore: ({ dataDir }) => openLevelDocumentStore({ directory: join(dataDir, "documents") }),
      openKvStore: async () => new MemoryKvStore(),
    };
  }
}

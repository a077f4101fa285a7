/**
 * The storage a module's handles reach (spec document 3, "storage"; docs/decisions/modules.md,
 * "Storage"). Documents: one collection per module in the document store, `module_<id>` (dashes as
 * underscores; a hashed name past the store's 50 characters), each document kept as its fields plus
 * `_id` = `<collection>/<id>` and `_c` = the module's collection name, so a module's collections
 * never meet another's and a backup carries them like any collection. Key-value: keys under
 * `cloud:v1:module-kv:<id>:`. A handle the manifest does not declare is refused; a write that would
 * take the module past `storage.limits` is refused with the storage-quota error (limits are counted
 * by this controller before the write; writes racing on several controllers may pass a limit by as
 * many documents or keys as raced).
 */
import { createHash } from "node:crypto";
import { InvalidArgumentError, StorageQuotaError, UndeclaredStorageError } from "../../sdk/module/errors.js";
import type { Doc, DocumentStore, Filter, FindOptions, KvStore } from "../../store/ports.js";
import type { ModuleManifest } from "../manifest/manifest-types.js";
import { SerialQueue } from "./serial.js";

/** Prefix of every module key in the key-value store (the backup's `module-kv` part). */
export const MODULE_KV_PREFIX = "cloud:v1:module-kv:";
/** A module's own key prefix. */
export const moduleKvPrefix = (moduleId: string): string => `${MODULE_KV_PREFIX}${moduleId}:`;

/** The document-store collection holding a module's documents. */
export function moduleCollectionName(moduleId: string): string {
  const name = `module_${moduleId.replace(/-/g, "_")}`;
  if (name.length <= 50) return name;
  return `${name.slice(0, 37)}_${createHash("sha256").update(moduleId).digest("hex").slice(0, 12)}`;
}

const COLLECTION_PATTERN = /^[a-z][a-z0-9_-]{0,63}$/;
const DOCUMENT_ID_BYTES_MAX = 512;
const KEY_BYTES_MAX = 512;
const VALUE_BYTES_MAX = 1024 * 1024;
const DOCUMENT_BYTES_MAX = 1024 * 1024;
/** Most documents one find answers, and most keys one keys() lists. */
export const FIND_RESULTS_MAX = 1_000;
export const KEYS_LISTED_MAX = 10_000;
const RESERVED_FIELD = "_c";

function checkCollection(name: unknown): string {
  if (typeof name !== "string" || !COLLECTION_PATTERN.test(name))
    throw new InvalidArgumentError(`collection name ${JSON.stringify(name)} must match ${COLLECTION_PATTERN.source}`);
  return name;
}

function checkId(id: unknown, what: string, bytesMax: number): string {
  if (typeof id !== "string" || id.length === 0 || Buffer.byteLength(id) > bytesMax)
    throw new InvalidArgumentError(`${what} must be a non-empty string of at most ${bytesMax} bytes`);
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f]/.test(id)) throw new InvalidArgumentError(`${what} must not contain control characters`);
  return id;
}

/** What one module may store, from its manifest. */
type StorageGrant = Pick<ModuleManifest, "id" | "storage">;

/** See the module comment. */
export class ModuleStorageHost {
  private readonly writes = new SerialQueue();

  constructor(
    private readonly documents: DocumentStore,
    private readonly kv: KvStore,
  ) {}

  // --- documents ---

  private collection(grant: StorageGrant) {
    if (!grant.storage.mongo) throw new UndeclaredStorageError(`${grant.id} did not declare storage.mongo: true`);
    return this.documents.collection(moduleCollectionName(grant.id), { indexes: [{ name: "by_collection", field: RESERVED_FIELD }] });
  }

  private stored(collection: string, doc: unknown): Doc {
    if (typeof doc !== "object" || doc === null || Array.isArray(doc)) throw new InvalidArgumentError("a document must be an object");
    const fields = doc as Record<string, unknown>;
    const id = checkId(fields._id, "_id", DOCUMENT_ID_BYTES_MAX);
    if (RESERVED_FIELD in fields) throw new InvalidArgumentError(`the field ${RESERVED_FIELD} is reserved`);
    if (Buffer.byteLength(JSON.stringify(fields)) > DOCUMENT_BYTES_MAX)
      throw new InvalidArgumentError(`a document is at most ${DOCUMENT_BYTES_MAX} bytes of JSON`);
    return { ...fields, _id: `${collection}/${id}`, [RESERVED_FIELD]: collection };
  }

  private shown(doc: Doc): Doc {
    const { [RESERVED_FIELD]: collection, ...fields } = doc;
    return { ...fields, _id: doc._id.slice(String(collection).length + 1) };
  }

  private scoped(collection: string, filter: unknown): Filter {
    if (filter === undefined || filter === null) return { [RESERVED_FIELD]: collection };
    if (typeof filter !== "object" || Array.isArray(filter)) throw new InvalidArgumentError("a filter must be an object");
    const scoped: Filter = {};
    for (const [field, condition] of Object.entries(filter as Filter)) {
      if (field === RESERVED_FIELD) throw new InvalidArgumentError(`the field ${RESERVED_FIELD} is reserved`);
      if (field === "_id") {
        scoped._id = this.scopedId(collection, condition);
        continue;
      }
      scoped[field] = condition;
    }
    scoped[RESERVED_FIELD] = collection;
    return scoped;
  }

  /** An `_id` condition on the stored ids: an id, `$in` ids, or string bounds, each under the collection's prefix. */
  private scopedId(collection: string, condition: Filter[string]): Filter[string] {
    const prefixed = (id: unknown) => {
      if (typeof id !== "string") throw new InvalidArgumentError("_id conditions compare strings");
      return `${collection}/${id}`;
    };
    if (typeof condition === "string") return prefixed(condition);
    if (condition === null || typeof condition !== "object") throw new InvalidArgumentError("_id conditions compare strings");
    const range: Record<string, unknown> = {};
    for (const [operator, value] of Object.entries(condition)) {
      if (operator === "$in" && Array.isArray(value)) range.$in = value.map(prefixed);
      else if (["$gt", "$gte", "$lt", "$lte"].includes(operator)) range[operator] = prefixed(value);
      else throw new InvalidArgumentError(`_id condition ${operator} is not supported`);
    }
    // Without an upper bound a range would run into the next collection's ids.
    if (range.$lt === undefined && range.$lte === undefined && range.$in === undefined) range.$lt = `${collection}0`;
    if (range.$gt === undefined && range.$gte === undefined && range.$in === undefined) range.$gte = `${collection}/`;
    return range as Filter[string];
  }

  private async withinQuota(grant: StorageGrant, isNew: () => Promise<boolean>): Promise<void> {
    const limit = grant.storage.limits.mongoDocuments;
    if (limit <= 0 || !(await isNew())) return;
    const count = await this.collection(grant).count();
    if (count >= limit) throw new StorageQuotaError(`${grant.id} holds ${count} documents; storage.limits.mongoDocuments is ${limit}`);
  }

  insertDocument(grant: StorageGrant, name: unknown, doc: unknown): Promise<void> {
    const collection = checkCollection(name);
    const stored = this.stored(collection, doc);
    return this.writes.run(grant.id, async () => {
      await this.withinQuota(grant, async () => true);
      await this.collection(grant).insert(stored);
    });
  }

  putDocument(grant: StorageGrant, name: unknown, doc: unknown): Promise<void> {
    const collection = checkCollection(name);
    const stored = this.stored(collection, doc);
    return this.writes.run(grant.id, async () => {
      await this.withinQuota(grant, async () => (await this.collection(grant).get(stored._id)) === null);
      await this.collection(grant).put(stored);
    });
  }

  async getDocument(grant: StorageGrant, name: unknown, id: unknown): Promise<Doc | null> {
    const collection = checkCollection(name);
    const doc = await this.collection(grant).get(`${collection}/${checkId(id, "_id", DOCUMENT_ID_BYTES_MAX)}`);
    return doc && this.shown(doc);
  }

  deleteDocument(grant: StorageGrant, name: unknown, id: unknown): Promise<boolean> {
    const collection = checkCollection(name);
    return this.collection(grant).delete(`${collection}/${checkId(id, "_id", DOCUMENT_ID_BYTES_MAX)}`);
  }

  async findDocuments(grant: StorageGrant, name: unknown, filter: unknown, options: unknown): Promise<Doc[]> {
    const collection = checkCollection(name);
    const given = (options ?? {}) as FindOptions;
    const limit = Math.min(Number.isSafeInteger(given.limit) && given.limit! > 0 ? given.limit! : FIND_RESULTS_MAX, FIND_RESULTS_MAX);
    const sort =
      given.sort && typeof given.sort.field === "string" && given.sort.field !== RESERVED_FIELD
        ? ({ field: given.sort.field, direction: given.sort.direction === -1 ? -1 : 1 } as const)
        : undefined;
    const skip = Number.isSafeInteger(given.skip) && given.skip! > 0 ? given.skip : undefined;
    const docs = await this.collection(grant).find(this.scoped(collection, filter), { sort, skip, limit });
    return docs.map((doc) => this.shown(doc));
  }

  countDocuments(grant: StorageGrant, name: unknown, filter: unknown): Promise<number> {
    return this.collection(grant).count(this.scoped(checkCollection(name), filter));
  }

  // --- key-value ---

  private key(grant: StorageGrant, key: unknown): string {
    if (!grant.storage.redis) throw new UndeclaredStorageError(`${grant.id} did not declare storage.redis: true`);
    return `${moduleKvPrefix(grant.id)}${checkId(key, "key", KEY_BYTES_MAX)}`;
  }

  private async keyWithinQuota(grant: StorageGrant, full: string): Promise<void> {
    const limit = grant.storage.limits.redisKeys;
    if (limit <= 0 || (await this.kv.get(full)) !== null) return;
    const count = (await this.kv.keys(moduleKvPrefix(grant.id))).length;
    if (count >= limit) throw new StorageQuotaError(`${grant.id} holds ${count} keys; storage.limits.redisKeys is ${limit}`);
  }

  getKey(grant: StorageGrant, key: unknown): Promise<string | null> {
    return this.kv.get(this.key(grant, key));
  }

  setKey(grant: StorageGrant, key: unknown, value: unknown, ttlMs: unknown): Promise<void> {
    const full = this.key(grant, key);
    if (typeof value !== "string" || Buffer.byteLength(value) > VALUE_BYTES_MAX)
      throw new InvalidArgumentError(`a value is a string of at most ${VALUE_BYTES_MAX} bytes`);
    if (ttlMs !== null && ttlMs !== undefined && (!Number.isSafeInteger(ttlMs) || (ttlMs as number) <= 0))
      throw new InvalidArgumentError("ttlMs must be a positive integer");
    return this.writes.run(grant.id, async () => {
      await this.keyWithinQuota(grant, full);
      await this.kv.set(full, value, typeof ttlMs === "number" ? { ttlMs } : undefined);
    });
  }

  deleteKey(grant: StorageGrant, key: unknown): Promise<boolean> {
    return this.kv.delete(this.key(grant, key));
  }

  async listKeys(grant: StorageGrant, prefix: unknown): Promise<string[]> {
    const own = this.key(grant, "x").slice(0, -1);
    if (typeof prefix !== "string") throw new InvalidArgumentError("a key prefix must be a string");
    const keys = await this.kv.keys(own + prefix);
    return keys.slice(0, KEYS_LISTED_MAX).map((key) => key.slice(own.length));
  }

  incrementKey(grant: StorageGrant, key: unknown): Promise<number> {
    const full = this.key(grant, key);
    return this.writes.run(grant.id, async () => {
      await this.keyWithinQuota(grant, full);
      return this.kv.increment(full);
    });
  }

  // --- administration ---

  /** What a module holds: documents and keys. */
  async usage(moduleId: string): Promise<{ documents: number; keys: number }> {
    const documents = await this.documents.collection(moduleCollectionName(moduleId)).count();
    const keys = (await this.kv.keys(moduleKvPrefix(moduleId))).length;
    return { documents, keys };
  }

  /** Removes every document and key of a module (`platform-module.storage.drop`). */
  async drop(moduleId: string): Promise<{ documents: number; keys: number }> {
    return this.writes.run(moduleId, async () => {
      const documents = await this.documents.collection(moduleCollectionName(moduleId)).deleteMany({});
      let keys = 0;
      for (const key of await this.kv.keys(moduleKvPrefix(moduleId))) if (await this.kv.delete(key)) keys++;
      return { documents, keys };
    });
  }
}

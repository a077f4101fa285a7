/**
 * Order-preserving key layout of the embedded document store. Every key is a string whose UTF-8
 * bytes (LevelDB's order) sort like the values it encodes:
 *
 *   D \0 <collection> \0 <id>                              → document JSON
 *   I \0 <collection> \0 <index> \0 <value> \0 <id>        → "" (secondary index entry)
 *   T \0 <collection> \0 <expiresAtMs> \0 <id>             → "" (TTL schedule entry)
 *   M \0 <collection>                                      → collection metadata (declared spec)
 *
 * Every collection ever used has its M key, so the M keys list the collections (snapshots).
 *
 * Ids and string values are escaped so they never contain \0 (\0 → \1\1, \1 → \1\2); escaping keeps
 * code point order and prefix relations, so `<value> \0` ends a value unambiguously.
 */
import { assert } from "../../shared/errors.js";

const separator = "\x00";

/** Escapes \0 and \1 so the result contains no \0 and sorts like the input. */
export function escapeKeyPart(raw: string): string {
  return raw.replaceAll("\x01", "\x01\x02").replaceAll("\x00", "\x01\x01");
}

/** Inverse of {@link escapeKeyPart}. */
export function unescapeKeyPart(escaped: string): string {
  if (!escaped.includes("\x01")) return escaped;
  let out = "";
  for (let i = 0; i < escaped.length; i++) {
    const ch = escaped[i];
    if (ch !== "\x01") {
      out += ch;
      continue;
    }
    out += escaped[i + 1] === "\x01" ? "\x00" : "\x01";
    i++;
  }
  return out;
}

/** Fixed-width hex encoding of a float64 whose string order equals numeric order. */
export function encodeNumber(value: number): string {
  assert(Number.isFinite(value), "only finite numbers can be indexed");
  const bytes = Buffer.alloc(8);
  bytes.writeDoubleBE(value === 0 ? 0 : value);
  if (bytes[0] & 0x80) {
    for (let i = 0; i < 8; i++) bytes[i] = ~bytes[i] & 0xff;
  } else {
    bytes[0] ^= 0x80;
  }
  return bytes.toString("hex");
}

/** Type tags in sort order: missing < null < number < string < object < array < boolean. */
export const valueTags = { missing: "0", null: "1", number: "2", string: "3", object: "4", array: "5", boolean: "6" } as const;

/** Tag that follows `tag` (an exclusive upper bound for every value of that type). */
export function nextTag(tag: string): string {
  return String.fromCharCode(tag.charCodeAt(0) + 1);
}

/** Encodes a field value for an index key (see the module comment for the order). */
export function encodeIndexValue(value: unknown): string {
  if (value === undefined) return valueTags.missing;
  if (value === null) return valueTags.null;
  if (typeof value === "number") return valueTags.number + encodeNumber(value);
  if (typeof value === "string") return valueTags.string + escapeKeyPart(value);
  if (typeof value === "boolean") return valueTags.boolean + (value ? "1" : "0");
  if (Array.isArray(value)) return valueTags.array + escapeKeyPart(JSON.stringify(value));
  return valueTags.object + escapeKeyPart(JSON.stringify(value));
}

/** Key builders for one collection. */
export class CollectionKeys {
  readonly docPrefix: string;
  readonly ttlPrefix: string;
  readonly meta: string;

  constructor(readonly collection: string) {
    this.docPrefix = `D${separator}${collection}${separator}`;
    this.ttlPrefix = `T${separator}${collection}${separator}`;
    this.meta = `M${separator}${collection}`;
  }

  doc(id: string): string {
    return this.docPrefix + escapeKeyPart(id);
  }

  /** First key after every document key of the collection. */
  get docEnd(): string {
    return this.docPrefix.slice(0, -1) + "\x01";
  }

  indexPrefix(indexName: string): string {
    return `I${separator}${this.collection}${separator}${escapeKeyPart(indexName)}${separator}`;
  }

  indexEntry(indexName: string, value: unknown, id: string): string {
    return this.indexPrefix(indexName) + encodeIndexValue(value) + separator + escapeKeyPart(id);
  }

  ttlEntry(expiresAtMs: number, id: string): string {
    return this.ttlPrefix + encodeNumber(expiresAtMs) + separator + escapeKeyPart(id);
  }

  /** Exclusive upper bound of TTL entries expiring at or before `nowMs`. */
  ttlDueEnd(nowMs: number): string {
    return this.ttlPrefix + encodeNumber(nowMs) + "\x01";
  }

  /** First key of every index entry of the collection, whatever the index. */
  get indexesPrefix(): string {
    return `I${separator}${this.collection}${separator}`;
  }

  /** First key after every index entry of the collection. */
  get indexesEnd(): string {
    return this.indexesPrefix.slice(0, -1) + "\x01";
  }

  get ttlEnd(): string {
    return this.ttlPrefix.slice(0, -1) + "\x01";
  }
}

/** The document id at the end of an index or TTL key (after the last separator). */
export function idFromEntryKey(key: string): string {
  const at = key.lastIndexOf(separator);
  assert(at >= 0, "malformed entry key");
  return unescapeKeyPart(key.slice(at + 1));
}

/** The document id of a document key. */
export function idFromDocKey(keys: CollectionKeys, key: string): string {
  assert(key.startsWith(keys.docPrefix), "document key outside its collection");
  return unescapeKeyPart(key.slice(keys.docPrefix.length));
}

/** First and after-last keys of the collection metadata keys (one per collection). */
export const metaRange = { gte: `M${separator}`, lt: "M\x01" } as const;

/** The collection named by a metadata key. */
export function collectionFromMetaKey(key: string): string {
  assert(key.startsWith(metaRange.gte), "metadata key expected");
  return key.slice(metaRange.gte.length);
}

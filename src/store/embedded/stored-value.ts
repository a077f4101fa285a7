/**
 * The value of a document key in the embedded store: `<revision> <document JSON>`. A revision holds
 * no space (src/store/revisions.ts); a value that starts with `{` was written before documents had
 * revisions and reads as {@link LEGACY_REVISION}.
 */
import { assert } from "../../shared/errors.js";
import type { Doc } from "../ports.js";
import { LEGACY_REVISION } from "../revisions.js";

/** The stored form of `doc` at `rev`. */
export function encodeStoredValue(rev: string, doc: Doc): string {
  return `${rev} ${JSON.stringify(doc)}`;
}

/** The revision and the document of a stored value. */
export function decodeStoredValue<T extends Doc>(value: string): { rev: string; doc: T } {
  if (value.startsWith("{")) return { rev: LEGACY_REVISION, doc: JSON.parse(value) as T };
  const space = value.indexOf(" ");
  assert(space > 0, "stored document value without a revision");
  return { rev: value.slice(0, space), doc: JSON.parse(value.slice(space + 1)) as T };
}

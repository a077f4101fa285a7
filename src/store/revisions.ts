/**
 * Document revisions ({@link Revisioned}): a random prefix drawn once per process, then a counter.
 * Every write gets a revision no other write of any process has had (72 random bits keep two
 * processes' prefixes apart), so a writer holding an old revision never matches a later version,
 * not even one written after a delete and a re-insert of the same `_id` (what a per-document
 * counter starting again at 1 would allow). Revisions are compared for equality only.
 */
import { randomBytes } from "node:crypto";
import type { Revisioned } from "./ports.js";

/** The revision of a document written before documents had revisions. */
export const LEGACY_REVISION = "0";

const processPrefix = randomBytes(9).toString("base64url");
let written = 0;

/** A revision never handed out before. */
export function newRevision(): string {
  written += 1;
  return `${processPrefix}${written.toString(36)}`;
}

/** The documents of revisioned reads (for callers that need no revision). */
export const docsOf = <T extends Revisioned["doc"]>(found: readonly Revisioned<T>[]): T[] => found.map((entry) => entry.doc);

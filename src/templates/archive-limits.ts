/**
 * Bounds on archives read from clients (uploads, extracts, imports): how many entries and how many
 * unpacked bytes one archive may produce. They stop zip and gzip bombs before memory runs out.
 */
import { validationError } from "../shared/errors.js";
import type { FileContent } from "./file-content.js";

/** Limits applied while reading one archive. */
export interface ArchiveLimits {
  /** Most entries (files and directories) one archive may hold. */
  entriesMax: number;
  /** Most bytes all entries together may unpack to. */
  unpackedBytesMax: number;
}

/** Defaults: generous for game-server templates, far below what would exhaust memory. */
export const DEFAULT_ARCHIVE_LIMITS: ArchiveLimits = {
  entriesMax: 20_000,
  unpackedBytesMax: 512 * 1024 * 1024,
};

/**
 * A file or directory read from an archive, its path already confined to the template. A file's
 * bytes are in the unpack spool (`archive-spool.ts`), described by `content`; a directory has none.
 */
export type ArchiveEntry = { path: string; kind: "dir"; mode: number } | { path: string; kind: "file"; mode: number; content: FileContent };

/** The 422 an archive that breaks a rule gets; nothing of it is written. */
export function archiveError(message: string): Error {
  return validationError(`archive: ${message}`, "INVALID_ARCHIVE");
}

/**
 * The changes an upload or an unpacked ZIP makes to a template's files, collected as a list before
 * anything is applied: every path and every bound is checked first, so a refused upload or archive
 * writes nothing. Applying the list to a {@link FileTree} is the template service's step.
 */
import { open } from "node:fs/promises";
import { join } from "node:path";
import { joinTemplatePath, normalizeTemplatePath } from "../wire/template-paths.js";
import { archiveError, type ArchiveEntry, type ArchiveLimits } from "./archive-limits.js";
import type { ArchiveSpool } from "./archive-spool.js";
import { contentOfBytes } from "./file-content.js";
import type { FileTree } from "./file-tree.js";
import type { SpooledFile } from "./upload-spool.js";
import { looksLikeZip, unpackZip } from "./zip.js";

/** One change of an upload or an archive: a directory, or a file with its content. */
export type TreeWrite = ArchiveEntry;

/** A file given to `TemplateService.upload`: bytes in memory, or a multipart part spooled to disk. */
export type UploadedFile = { fileName: string; data: Uint8Array } | SpooledFile;

/** True when an uploaded file is a ZIP: by its name, or by its first bytes. */
export function isZipUpload(file: UploadedFile): boolean {
  return file.fileName.toLowerCase().endsWith(".zip") || looksLikeZip("data" in file ? file.data : file.head);
}

/**
 * The writes of uploading `files` below directory `base` (already normalised). With a `spool`, ZIP
 * uploads are unpacked into it, each bounded by what the files before it left of `limits`; without
 * one they are stored as files. 422 when a path breaks the rules or the whole exceeds `limits`.
 */
export async function uploadWrites(base: string, files: readonly UploadedFile[], spool: ArchiveSpool | null, limits: ArchiveLimits): Promise<TreeWrite[]> {
  const writes: TreeWrite[] = [];
  for (const file of files) {
    if (spool && isZipUpload(file)) {
      const source = "data" in file ? { data: file.data } : { path: file.path };
      for (const entry of await unpackZip(source, remainingBounds(writes, limits), spool)) writes.push(rebase(entry, base));
    } else {
      const fileName = normalizeTemplatePath(file.fileName, "file name");
      const content = "data" in file ? contentOfBytes(file.data) : file.content;
      writes.push({ path: joinTemplatePath(base, fileName), kind: "file", mode: 0, content });
    }
  }
  checkArchiveBounds(writes, limits);
  for (const w of writes) normalizeTemplatePath(w.path, "path");
  return writes;
}

/**
 * The writes of unpacking a ZIP stored in the template below directory `target`. Its bytes (`chunks`)
 * are copied to a file in `spool` first (a ZIP is read from its end), then unpacked entry by entry
 * into the same spool. 422 INVALID_ARCHIVE when the file is not a ZIP or breaks `limits`.
 */
export async function zipWrites(chunks: AsyncIterable<Uint8Array>, target: string, spool: ArchiveSpool, limits: ArchiveLimits): Promise<TreeWrite[]> {
  const zipPath = join(spool.directory, "archive.zip");
  const handle = await open(zipPath, "wx");
  try {
    for await (const chunk of chunks) await handle.writeFile(chunk);
  } finally {
    await handle.close();
  }
  const head = Buffer.alloc(4);
  const reader = await open(zipPath, "r");
  await reader.read(head, 0, 4, 0).finally(() => reader.close());
  if (!looksLikeZip(head)) throw archiveError("the file is not a ZIP archive");
  const writes = (await unpackZip({ path: zipPath }, limits, spool)).map((e) => rebase(e, target));
  for (const w of writes) normalizeTemplatePath(w.path, "path");
  return writes;
}

/** Applies `writes` to `tree` in order: directories made, files written (their blobs left pending). */
export function applyWrites(tree: FileTree, writes: readonly TreeWrite[]): void {
  for (const write of writes) {
    if (write.kind === "dir") tree.mkdir(write.path);
    else tree.writeContent(write.path, write.content, write.mode);
  }
}

/** An archive entry moved below directory `base` of the template. */
function rebase(entry: ArchiveEntry, base: string): TreeWrite {
  return { ...entry, path: joinTemplatePath(base, entry.path) };
}

/** The archive limits left for the next ZIP of an upload, after the writes collected so far. */
function remainingBounds(writes: readonly TreeWrite[], limits: ArchiveLimits): ArchiveLimits {
  let total = 0;
  for (const w of writes) total += w.kind === "file" ? w.content.size : 0;
  return { entriesMax: Math.max(0, limits.entriesMax - writes.length), unpackedBytesMax: Math.max(0, limits.unpackedBytesMax - total) };
}

function checkArchiveBounds(writes: readonly TreeWrite[], limits: ArchiveLimits): void {
  if (writes.length > limits.entriesMax) throw archiveError(`more than ${limits.entriesMax} entries`);
  let total = 0;
  for (const w of writes) total += w.kind === "file" ? w.content.size : 0;
  if (total > limits.unpackedBytesMax) throw archiveError(`unpacks to more than ${limits.unpackedBytesMax} bytes`);
}

/**
 * One entry of a template version's manifest as the controller's manifest route answers it and the
 * daemon's template cache reads it. The controller builds and hashes manifests in
 * `src/templates/manifest.ts`; the daemon unpacks them.
 */

/** One file or directory of a version. Directories have size 0 and an empty sha256. */
export interface ManifestEntry {
  path: string;
  mode: number;
  size: number;
  sha256: string;
  /** Chunk blobs of a file above FILE_CHUNK_BYTES, in order; absent for every other entry. */
  chunks?: readonly string[];
}

/** True when mode bits say directory. */
export function isDirMode(mode: number): boolean {
  return (mode & 0o170000) === 0o040000;
}

/** True for directory entries. */
export function isDirEntry(entry: ManifestEntry): boolean {
  return isDirMode(entry.mode);
}

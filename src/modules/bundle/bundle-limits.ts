/**
 * Bounds of module bundles (docs/decisions/modules.md): a bundle file, what it unpacks to, its
 * signature sidecar and the descriptor of its dashboard bundle. The archive bounds are the templates'
 * {@link ArchiveLimits}, tighter: a module is code and a few assets, not a game server's files.
 */
import type { ArchiveLimits } from "../../templates/archive-limits.js";

/** Largest bundle file an upload, an upgrade or a registry download may bring. */
export const MODULE_BUNDLE_BYTES_MAX = 64 * 1024 * 1024;
/** Entries and unpacked bytes of one bundle. */
export const MODULE_ARCHIVE_LIMITS: ArchiveLimits = { entriesMax: 5_000, unpackedBytesMax: 256 * 1024 * 1024 };
/** Largest signature sidecar (a detached Ed25519 signature is 64 bytes, 88 in base64). */
export const SIGNATURE_BYTES_MAX = 4 * 1024;
/** Largest `module-frontend.json`. */
export const FRONTEND_DESCRIPTOR_BYTES_MAX = 64 * 1024;

/** Template read models (spec document 1, "Template, version, and other read models"), the naming rule and limits. */
import { validationError } from "../shared/errors.js";
import type { Doc } from "../store/ports.js";
import type { ManifestEntry } from "../wire/template-manifest.js";
import { DEFAULT_ARCHIVE_LIMITS, type ArchiveLimits } from "./archive-limits.js";

/** Collection of template metadata, keyed by name. */
export const TEMPLATES_COLLECTION = "templates";
/** Collection of version records, keyed by `<name>@<hash>`. */
export const TEMPLATE_VERSIONS_COLLECTION = "template_versions";

/** Template names: lower-case letters, digits, `_` and `-`, not starting with `-`. */
export const TEMPLATE_NAME_PATTERN = /^[a-z0-9_][a-z0-9_-]*$/;
/** Longest template name, in characters. */
export const TEMPLATE_NAME_LENGTH_MAX = 32;
/** Names with this prefix are synthetic module-plugin templates that cannot be deleted. */
export const PROTECTED_TEMPLATE_PREFIX = "_module-plugins-";

/** The template record of list and single responses. */
export interface Template {
  name: string;
  description: string;
  platform: string;
  /** Full hex sha256 of the current manifest. */
  hash: string;
  sizeBytes: number;
}

/** One version snapshot. */
export interface TemplateVersion {
  templateName: string;
  hash: string;
  sizeBytes: number;
  createdAt: string;
}

/** A directory listing row. */
export interface FileListing {
  name: string;
  path: string;
  type: "file" | "directory";
  size: number;
  mode: number;
  sha256: string;
}

/** The outcome of a change: the hashes before and after (equal when nothing changed). */
export interface TemplateChange {
  template: Template;
  oldHash: string;
  newHash: string;
  changed: boolean;
}

/** A version's manifest with what the daemon needs to unpack it. */
export interface TemplateManifest {
  templateName: string;
  hash: string;
  variables: Record<string, string>;
  entries: ManifestEntry[];
}

/** The stored template document. */
export interface StoredTemplate extends Doc, Template {
  fileCount: number;
  variables: Record<string, string>;
  /** Sequence number of the newest version, for newest-first ordering within one millisecond. */
  versionSeq: number;
  createdAt: string;
  updatedAt: string;
}

/** The stored version document. */
export interface StoredTemplateVersion extends Doc, TemplateVersion {
  seq: number;
  fileCount: number;
}

/** Bounds of the template service; every one is configurable for tests and benchmarks. */
export interface TemplateLimits extends ArchiveLimits {
  /** Largest file the text routes read or write, and the largest file search and scan look into. */
  textBytesMax: number;
  /** Most file bytes one search or scan reads before stopping. */
  scanBytesMax: number;
  /** Most variables per template. */
  variablesMax: number;
  /** Parsed manifests kept in memory (manifests are immutable, so this is a plain cache). */
  manifestCacheEntriesMax: number;
}

/** Default bounds. */
export const DEFAULT_TEMPLATE_LIMITS: TemplateLimits = {
  ...DEFAULT_ARCHIVE_LIMITS,
  textBytesMax: 1024 * 1024,
  scanBytesMax: 256 * 1024 * 1024,
  variablesMax: 256,
  manifestCacheEntriesMax: 16,
};

/** The public record of a stored template. */
export function toTemplate(doc: StoredTemplate): Template {
  return { name: doc.name, description: doc.description, platform: doc.platform, hash: doc.hash, sizeBytes: doc.sizeBytes };
}

/** The public record of a stored version. */
export function toVersion(doc: StoredTemplateVersion): TemplateVersion {
  return { templateName: doc.templateName, hash: doc.hash, sizeBytes: doc.sizeBytes, createdAt: doc.createdAt };
}

/** 422 for a template name that breaks the naming rule (create and import). */
export function assertTemplateName(name: string, field: string): void {
  if (typeof name !== "string" || name.length === 0 || name.length > TEMPLATE_NAME_LENGTH_MAX || !TEMPLATE_NAME_PATTERN.test(name)) {
    throw validationError(`${field}: must match ${TEMPLATE_NAME_PATTERN.source} and be at most ${TEMPLATE_NAME_LENGTH_MAX} characters`);
  }
}

/**
 * What templates offer over the text of their files: the `{{var}}` substitutions (checking a new
 * set), the scan for placeholders in the current files, and the search of paths and lines. Reads
 * only: the text files of a version are visited one at a time, each at most `textBytesMax`, and a
 * scan or search stops after `scanBytesMax` file bytes.
 */
import { validationError } from "../shared/errors.js";
import { isDirEntry, type ManifestEntry } from "../wire/template-manifest.js";
import { decodeText, INSTANCE_PLACEHOLDERS, placeholdersIn } from "../wire/template-text.js";
import type { TemplateLimits } from "./template-records.js";

/** Files listed per variable in a scan result. */
const SCAN_FILES_PER_VARIABLE_MAX = 50;
/** Variable names: the placeholder syntax. */
const VARIABLE_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,64}$/;
/** Longest variable value, in characters. */
const VARIABLE_VALUE_LENGTH_MAX = 4096;
/** Longest search preview of a matching line, in characters. */
const SEARCH_PREVIEW_LENGTH_MAX = 200;

/** One search hit: a path match (no line) or a matching line of a text file. */
export interface SearchHit {
  path: string;
  line?: number;
  preview?: string;
}

/** A placeholder found in the text files: where it occurs and whether the template defines it. */
export interface ScannedVariable {
  name: string;
  defined: boolean;
  /** Filled by the daemon for every instance (src/wire/template-text.ts, INSTANCE_PLACEHOLDERS). */
  builtIn: boolean;
  files: string[];
}

/** The template a text tool reads: its current hash and its substitutions. */
export interface TextTemplate {
  name: string;
  hash: string;
  variables: Record<string, string>;
}

/** Where the text tools read files from: a version's entries, and a file's bytes (null when a blob is gone). */
export interface TextFileSource {
  readManifest(hash: string, name?: string): Promise<{ entries: readonly ManifestEntry[] }>;
  read(entry: ManifestEntry): Promise<Uint8Array | null>;
}

/** The bounds the text tools apply. */
export type TextToolLimits = Pick<TemplateLimits, "textBytesMax" | "scanBytesMax" | "variablesMax">;

/**
 * Placeholder scan and search over a template's current text files, and the check of a new set of
 * substitutions. Holds no state beyond its source and bounds; the template service calls it with a
 * template document it loaded.
 */
export class TemplateTextTools {
  constructor(
    private readonly source: TextFileSource,
    private readonly limits: TextToolLimits,
  ) {}

  /** The entries of `variables` once every name and value passed the rules; 422 for the first that does not. */
  checkVariables(variables: Record<string, string>): [string, string][] {
    const entries = Object.entries(variables);
    if (entries.length > this.limits.variablesMax) throw validationError(`variables: more than ${this.limits.variablesMax}`);
    for (const [key, value] of entries) {
      if (!VARIABLE_NAME_PATTERN.test(key)) throw validationError(`variables.${key.slice(0, 80)}: name must match ${VARIABLE_NAME_PATTERN.source}`);
      if (typeof value !== "string" || value.length > VARIABLE_VALUE_LENGTH_MAX)
        throw validationError(`variables.${key}: must be a string of at most ${VARIABLE_VALUE_LENGTH_MAX} characters`);
    }
    return entries;
  }

  /** Placeholders found in the current text files, sorted by name, at most 50 files each. */
  async scanVariables(doc: TextTemplate): Promise<{ variables: ScannedVariable[]; truncated: boolean }> {
    const found = new Map<string, string[]>();
    const truncated = await this.eachText(doc, (path, text) => {
      for (const variable of placeholdersIn(text)) {
        const files = found.get(variable) ?? [];
        if (files.length < SCAN_FILES_PER_VARIABLE_MAX) files.push(path);
        found.set(variable, files);
      }
      return true;
    });
    const variables = [...found]
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([variable, files]) => ({
        name: variable,
        defined: Object.hasOwn(doc.variables, variable),
        builtIn: (INSTANCE_PLACEHOLDERS as readonly string[]).includes(variable),
        files,
      }));
    return { variables, truncated };
  }

  /** Case-insensitive search of paths, then of text lines; at most `maxResults` hits. */
  async search(doc: TextTemplate, query: string, maxResults: number): Promise<{ query: string; results: SearchHit[]; truncated: boolean }> {
    const needle = query.toLowerCase();
    const results: SearchHit[] = [];
    const parsed = await this.source.readManifest(doc.hash);
    for (const entry of parsed.entries) {
      if (results.length >= maxResults) return { query, results, truncated: true };
      if (entry.path.toLowerCase().includes(needle)) results.push({ path: entry.path });
    }
    const scanTruncated = await this.eachText(doc, (path, text) => {
      const lines = text.split("\n");
      for (let i = 0; i < lines.length; i++) {
        if (!lines[i].toLowerCase().includes(needle)) continue;
        if (results.length >= maxResults) return false;
        results.push({ path, line: i + 1, preview: lines[i].slice(0, SEARCH_PREVIEW_LENGTH_MAX) });
      }
      return true;
    });
    return { query, results, truncated: scanTruncated };
  }

  /**
   * Calls `visit` with every UTF-8 file of the current version up to `textBytesMax`, in path order,
   * until it returns false. Returns true when it stopped early: `visit` said so, or the next file
   * would pass `scanBytesMax`.
   */
  async eachText(doc: TextTemplate, visit: (path: string, text: string) => boolean): Promise<boolean> {
    const parsed = await this.source.readManifest(doc.hash, doc.name);
    let scannedBytes = 0;
    for (const entry of parsed.entries) {
      if (isDirEntry(entry) || entry.size > this.limits.textBytesMax) continue;
      scannedBytes += entry.size;
      if (scannedBytes > this.limits.scanBytesMax) return true;
      const data = await this.source.read(entry);
      const text = data ? decodeText(data) : null;
      if (text !== null && !visit(entry.path, text)) return true;
    }
    return false;
  }
}

/**
 * Extracts the specification's lists that the code must cover — audit actions (document 2,
 * "Audited actions"), built-in event types (document 3, "Built-in event types and fields") and
 * metrics (document 2, "Metrics") — into `test/spec/spec-lists.json`, the committed copy the
 * conformance test reads (a fresh clone has no specification beside it).
 *
 *   npx tsx scripts/spec-lists.ts [spec directory]          writes the file
 *   npx tsx scripts/spec-lists.ts --check [spec directory]  exits 1 when the file is out of date
 *
 * The default specification directory is `CLOUD_SPEC_DIR`, else `../shared/spec` beside the repository.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export interface SpecLists {
  auditActions: string[];
  eventTypes: string[];
  metrics: string[];
}

const repoRoot = resolve(fileURLToPath(import.meta.url), "..", "..");
export const SPEC_LISTS_FILE = join(repoRoot, "test", "spec", "spec-lists.json");
/** `CLOUD_SPEC_DIR`, or `../shared/spec` beside the repository. */
export const DEFAULT_SPEC_DIR = resolve(process.env.CLOUD_SPEC_DIR ?? join(repoRoot, "..", "shared", "spec"));

/** The lines of the section that starts with a line matching `heading`, up to the next heading. */
function section(text: string, heading: RegExp): string[] {
  const lines = text.split("\n");
  const start = lines.findIndex((line) => heading.test(line));
  if (start < 0) throw new Error(`section ${heading} not found`);
  const end = lines.findIndex((line, i) => i > start && /^#{1,4} /.test(line));
  return lines.slice(start + 1, end < 0 ? undefined : end);
}

/** The cells of a markdown table row, trimmed; null for a line that is no data row. */
function cells(line: string): string[] | null {
  if (!line.startsWith("|") || /^\|[-| ]+\|$/.test(line)) return null;
  return line
    .split("|")
    .slice(1, -1)
    .map((cell) => cell.trim());
}

/** The three lists from the specification's documents in `specDir`. */
export function extractSpecLists(specDir: string): SpecLists {
  const doc2 = readFileSync(join(specDir, "2-cluster-backup-audit-logs-metrics-cli.md"), "utf8");
  const doc3 = readFileSync(join(specDir, "3-modules-plugins-events.md"), "utf8");
  const auditLines = doc2.split("\n");
  const auditStart = auditLines.findIndex((line) => line.startsWith("Audited actions"));
  if (auditStart < 0) throw new Error("Audited actions not found");
  const auditActions: string[] = [];
  for (const line of auditLines.slice(auditStart + 1)) {
    if (line.trim() === "" && auditActions.length > 0) break;
    const row = cells(line);
    if (!row || row[0] === "Domain") continue;
    auditActions.push(...row[1].split(",").map((action) => action.trim()));
  }
  const metrics = section(doc2, /^### Metrics$/)
    .map(cells)
    .filter((row): row is string[] => row !== null && row[0].startsWith("cloud_"))
    .map((row) => row[0]);
  const eventTypes = section(doc3, /^### Built-in event types and fields$/)
    .map(cells)
    .filter((row): row is string[] => row !== null && row[0] !== "Type")
    .flatMap((row) => row[0].split(",").map((type) => type.trim()));
  return { auditActions, eventTypes, metrics };
}

/** The file's text for `lists` (stable: sorted, two-space JSON, final newline). */
export function renderSpecLists(lists: SpecLists): string {
  const sorted = { auditActions: [...lists.auditActions].sort(), eventTypes: [...lists.eventTypes].sort(), metrics: [...lists.metrics].sort() };
  return `${JSON.stringify(sorted, null, 2)}\n`;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const check = args.includes("--check");
  const specDir = resolve(args.find((arg) => arg !== "--check") ?? DEFAULT_SPEC_DIR);
  const text = renderSpecLists(extractSpecLists(specDir));
  if (check) {
    const current = readFileSync(SPEC_LISTS_FILE, "utf8");
    if (current !== text) {
      console.error(`${SPEC_LISTS_FILE} is out of date with ${specDir}: run npx tsx scripts/spec-lists.ts`);
      process.exit(1);
    }
    console.log(`${SPEC_LISTS_FILE} matches ${specDir}`);
  } else {
    writeFileSync(SPEC_LISTS_FILE, text);
    const lists = JSON.parse(text) as SpecLists;
    console.log(
      `wrote ${SPEC_LISTS_FILE}: ${lists.auditActions.length} audit actions, ${lists.eventTypes.length} event types, ${lists.metrics.length} metrics`,
    );
  }
}

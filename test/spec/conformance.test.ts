/**
 * Spec conformance: the specification's lists against the code. The lists come from
 * `test/spec/spec-lists.json`, extracted from the specification by `scripts/spec-lists.ts` and
 * committed (a fresh clone has no specification beside it); when the specification is beside the
 * repository, the first test checks that the committed copy is current.
 *
 * - audit actions: written somewhere in src/ (a literal `"x.y"`, or a template `` `x.${…}` `` in a
 *   file that also holds the literal `"y"`, as the node routes build theirs);
 * - event types: published somewhere (an `EventTypes.X` outside the type catalogs on a line that
 *   neither subscribes nor compares);
 * - metrics: registered under their exposition name (test/metrics/spec-metrics.test.ts checks
 *   their types and labels on a running controller).
 *
 * Each test prints what is missing and fails on anything missing that is not on
 * {@link NOT_YET_BUILT}, and on anything on that list that has been built meanwhile (so the list
 * shrinks with the code). Keep the list in step with the README's "Not yet built".
 */
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, it } from "node:test";
import { DEFAULT_SPEC_DIR, extractSpecLists, renderSpecLists, SPEC_LISTS_FILE, type SpecLists } from "../../scripts/spec-lists.js";

/** Spec items no finished capability has built yet, each with the capability that will. */
const NOT_YET_BUILT: ReadonlyMap<string, string> = new Map([
  ["network.create", "networks"],
  ["network.update", "networks"],
  ["network.delete", "networks"],
  ["CHOREOGRAPHY_OVERLAY_ACTIVATED", "event overlays"],
  ["CHOREOGRAPHY_OVERLAY_DEACTIVATED", "event overlays"],
]);

const repoRoot = join(import.meta.dirname, "..", "..");
const srcRoot = join(repoRoot, "src");
const lists = JSON.parse(readFileSync(SPEC_LISTS_FILE, "utf8")) as SpecLists;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = join(dir, name);
    if (statSync(full).isDirectory()) return name === "dashboard" ? [] : sourceFiles(full);
    return name.endsWith(".ts") ? [full] : [];
  });
}
const sources = sourceFiles(srcRoot).map((file) => ({ file: relative(repoRoot, file), text: readFileSync(file, "utf8") }));

function auditWritten(action: string): boolean {
  if (sources.some((s) => s.text.includes(`"${action}"`))) return true;
  const dot = action.indexOf(".");
  const [prefix, rest] = [action.slice(0, dot), action.slice(dot + 1)];
  return sources.some((s) => s.text.includes(`\`${prefix}.\${`) && s.text.includes(`"${rest}"`));
}

const EVENT_CATALOGS = new Set(["src/events/event-types.ts", "src/events/event-access.ts"]);
function eventPublished(type: string): boolean {
  const ref = `EventTypes\\.${type}\\b`;
  const reference = new RegExp(ref);
  const notPublishing = new RegExp(`(subscribe\\w*|\\.on)\\(\\s*${ref}|case ${ref}|[!=]==\\s*${ref}|${ref}\\s*[!=]==`);
  return sources.some((s) => !EVENT_CATALOGS.has(s.file) && s.text.split("\n").some((line) => reference.test(line) && !notPublishing.test(line)));
}

const metricRegistered = (name: string): boolean => sources.some((s) => s.text.includes(`"${name}"`));

/** Checks one list; prints what is missing. */
function conform(kind: string, items: readonly string[], present: (item: string) => boolean): void {
  const missing = items.filter((item) => !present(item));
  if (missing.length > 0)
    console.log(`${kind} of the specification missing from the code: ${missing.map((m) => `${m} (${NOT_YET_BUILT.get(m) ?? "?"})`).join(", ")}`);
  const unexpected = missing.filter((item) => !NOT_YET_BUILT.has(item));
  assert.deepEqual(unexpected, [], `${kind} missing that a built capability should have`);
  const builtMeanwhile = items.filter((item) => NOT_YET_BUILT.has(item) && present(item));
  assert.deepEqual(builtMeanwhile, [], `${kind} built meanwhile: take them off NOT_YET_BUILT`);
}

describe("spec conformance", () => {
  it("the committed lists are those of the specification beside the repository", (t) => {
    if (!existsSync(DEFAULT_SPEC_DIR)) {
      t.skip(`no specification at ${DEFAULT_SPEC_DIR}: the committed ${relative(repoRoot, SPEC_LISTS_FILE)} is used as it is`);
      return;
    }
    assert.equal(readFileSync(SPEC_LISTS_FILE, "utf8"), renderSpecLists(extractSpecLists(DEFAULT_SPEC_DIR)), "out of date: run npx tsx scripts/spec-lists.ts");
  });

  it("holds the specification's lists: 57 audit actions, 36 event types, 44 metrics", () => {
    assert.equal(lists.auditActions.length, 57);
    assert.equal(lists.eventTypes.length, 36);
    assert.equal(lists.metrics.length, 44);
    for (const item of NOT_YET_BUILT.keys()) {
      assert.ok([...lists.auditActions, ...lists.eventTypes, ...lists.metrics].includes(item), `${item} is in the specification`);
    }
  });

  it("writes every audit action of the specification", () => conform("audit actions", lists.auditActions, auditWritten));
  it("publishes every built-in event type of the specification", () => conform("event types", lists.eventTypes, eventPublished));
  it("registers every metric of the specification", () => conform("metrics", lists.metrics, metricRegistered));

  it("the checks can fail: an invented action, event type and metric are missing", () => {
    assert.equal(auditWritten("user.teleport"), false);
    assert.equal(eventPublished("PLAYER_TELEPORTED"), false);
    assert.equal(metricRegistered("cloud_teleports_total"), false);
    assert.equal(auditWritten("node.cordon"), true, "built from a template in the node routes");
  });
});

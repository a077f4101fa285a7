// The backup allowlist keeps up with the code: every collection a service names in src/ (a
// `*_COLLECTION` constant or a literal `collection("…")`) is either backed up or never bundled, so a
// collection added later cannot silently be left out of every backup. And the controller's own
// store, once populated, holds nothing else.
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { BUNDLED_COLLECTIONS, isBundledCollection, NEVER_BUNDLED_COLLECTIONS, REQUIRED_COLLECTIONS } from "../../src/backup/bundle-format.js";
import { moduleCollectionName } from "../../src/modules/host/module-storage.js";
import { startTestApp, type TestApp } from "../support/http-app.js";
import { populate, SMALL_SCALE } from "./backup-fixtures.js";

const srcRoot = join(import.meta.dirname, "..", "..", "src");

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = join(dir, name);
    return statSync(full).isDirectory() ? sourceFiles(full) : name.endsWith(".ts") ? [full] : [];
  });
}

/** Collection names the source declares. */
function declaredCollections(): Map<string, string> {
  const found = new Map<string, string>();
  for (const file of sourceFiles(srcRoot)) {
    const text = readFileSync(file, "utf8");
    for (const m of text.matchAll(/export const [A-Z_]*COLLECTION\s*=\s*"([a-z0-9_]+)"/g)) found.set(m[1], file);
    for (const m of text.matchAll(/\.collection(?:<[^>(]*>)?\(\s*"([a-z0-9_]+)"/g)) found.set(m[1], file);
  }
  return found;
}

describe("the backup allowlist", () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
    await populate(t, { ...SMALL_SCALE, groups: 2, instances: 4, users: 2, auditEntries: 2, templates: 1, versionsPerTemplate: 1, templateFileBytes: 1024 });
  });
  after(() => t.close());

  it("sorts every collection of the source into bundled or never bundled, never both", () => {
    const declared = declaredCollections();
    assert.ok(declared.size >= 15, `found ${declared.size} collections in src/`);
    for (const [name, file] of declared)
      assert.ok(BUNDLED_COLLECTIONS.has(name) || NEVER_BUNDLED_COLLECTIONS.has(name), `${name} (${file}) is neither backed up nor listed as never bundled`);
    for (const name of NEVER_BUNDLED_COLLECTIONS) assert.ok(!BUNDLED_COLLECTIONS.has(name), name);
    for (const name of REQUIRED_COLLECTIONS) assert.ok(BUNDLED_COLLECTIONS.has(name), name);
  });

  it("bundles every platform module's own document collection, short or long id", () => {
    for (const id of ["motd", "player-stats", `a${"-long".repeat(20)}`]) assert.ok(isBundledCollection(moduleCollectionName(id)), moduleCollectionName(id));
    assert.ok(!isBundledCollection("module_"), "module_ alone is no module's collection");
  });

  it("a running controller's store holds no collection outside the two lists", async () => {
    const snapshot = await t.documents.snapshot();
    try {
      for (const name of await snapshot.collections())
        assert.ok(BUNDLED_COLLECTIONS.has(name) || NEVER_BUNDLED_COLLECTIONS.has(name), `${name} is neither backed up nor listed as never bundled`);
    } finally {
      await snapshot.release();
    }
  });
});

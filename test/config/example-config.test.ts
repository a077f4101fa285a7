import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Kind, type TSchema } from "@sinclair/typebox";
import { loadControllerConfig, parseConfigText, parseControllerConfig } from "../../src/config/load.js";
import { ControllerConfigSchema } from "../../src/config/schema.js";

const EXAMPLE_PATH = join(import.meta.dirname, "..", "..", "controller.example.yml");
const exampleText = readFileSync(EXAMPLE_PATH, "utf8");

/** Dotted paths of every leaf key of an object schema. */
function schemaLeafKeys(schema: TSchema, prefix = ""): string[] {
  const out: string[] = [];
  for (const [k, child] of Object.entries(schema.properties as Record<string, TSchema>)) {
    const key = prefix ? `${prefix}.${k}` : k;
    if (child[Kind] === "Object") out.push(...schemaLeafKeys(child, key));
    else out.push(key);
  }
  return out;
}

/** Dotted paths of every leaf of a parsed document (arrays are leaves). */
function documentLeafKeys(doc: Record<string, unknown>, prefix = ""): string[] {
  const out: string[] = [];
  for (const [k, v] of Object.entries(doc)) {
    const key = prefix ? `${prefix}.${k}` : k;
    if (typeof v === "object" && v !== null && !Array.isArray(v)) out.push(...documentLeafKeys(v as Record<string, unknown>, key));
    else out.push(key);
  }
  return out;
}

/** Turns the optional keys written as `# key: value` into real keys. */
const uncommentOptionalKeys = (text: string) => text.replace(/^(\s*)# ([A-Za-z][A-Za-z0-9]*): (.*)$/gm, "$1$2: $3");

describe("controller.example.yml", () => {
  it("loads to exactly the defaults", () => {
    const fromExample = loadControllerConfig({ path: EXAMPLE_PATH, env: {}, argv: [] });
    const defaults = parseControllerConfig({}, { env: {} });
    assert.deepEqual(fromExample, defaults);
  });

  it("mentions every schema key (optional ones commented out) and no other", () => {
    const doc = parseConfigText(uncommentOptionalKeys(exampleText), EXAMPLE_PATH);
    assert.deepEqual(documentLeafKeys(doc).sort(), schemaLeafKeys(ControllerConfigSchema).sort());
  });

  it("keeps the optional keys commented out, so production still requires kvstore.uri", () => {
    const doc = parseConfigText(exampleText, EXAMPLE_PATH) as { kvstore?: unknown; database?: unknown; cluster?: unknown };
    assert.equal(doc.kvstore, null);
    assert.equal(doc.database, null);
    assert.equal(doc.cluster, null);
  });

  it("opens every section with a comment", () => {
    const lines = exampleText.split("\n");
    for (const section of Object.keys(ControllerConfigSchema.properties)) {
      const at = lines.findIndex((l) => l === `${section}:`);
      assert.ok(at >= 0, `section ${section} present`);
      assert.match(lines[at + 1] ?? "", /^\s+#/, `section ${section} starts with a comment`);
    }
  });

  it("is still valid with the optional keys filled in", () => {
    const doc = parseConfigText(uncommentOptionalKeys(exampleText), EXAMPLE_PATH);
    const config = parseControllerConfig(doc, { env: {} });
    assert.equal(config.kvstore.uri, "redis://localhost:6379");
  });
});

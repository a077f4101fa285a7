// Property: for random documents, filters and sorts, the embedded store (through its indexes or by
// scanning) returns exactly what the reference semantics select, including strings with \0 that
// the key encoding must escape (the contract's property leaves \0 out: jsonb cannot hold it).
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { it } from "node:test";
import fc from "fast-check";
import { openLevelDocumentStore } from "../../src/store/embedded/level-document-store.js";
import type { Doc } from "../../src/store/ports.js";
import { checkAgainstReference, portableStrings, queryArbitraries, queryPropertySpec } from "./query-arbitraries.js";

const runs = 60;

it("embedded: indexed and scanned queries match the reference semantics, \\0 included", { timeout: 50_000 }, async () => {
  const directory = await mkdtemp(join(tmpdir(), "doc-prop-"));
  const store = await openLevelDocumentStore({ directory, ttlSweepIntervalMs: 0 });
  const { docs, filter, options } = queryArbitraries([...portableStrings, "a\u0000", "\u0000", "a\u0000b"]);
  let run = 0;
  try {
    await fc.assert(
      fc.asyncProperty(docs, filter, options, async (generated, f, o) => {
        await checkAgainstReference(store.collection<Doc>(`p${run++}`, queryPropertySpec), generated, f, o);
      }),
      { numRuns: runs, seed: 20261122 },
    );
  } finally {
    await store.close();
    await rm(directory, { recursive: true, force: true });
  }
});

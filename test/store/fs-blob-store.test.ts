// Runs the blob store contract against the filesystem adapter, plus its crash-safety details.
import assert from "node:assert/strict";
import { mkdtemp, readdir, rm, writeFile, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { it } from "node:test";
import { AssertionError } from "../../src/shared/errors.js";
import { openFsBlobStore } from "../../src/store/fs-blob-store.js";
import { runBlobStoreContract } from "./blob-store-contract.js";

runBlobStoreContract("filesystem", async () => {
  const directory = await mkdtemp(join(tmpdir(), "blobs-"));
  return {
    open: () => openFsBlobStore(directory),
    dispose: () => rm(directory, { recursive: true, force: true }),
  };
});

it("filesystem: removes leftover temp files on open and detects corrupt blobs", async () => {
  const directory = await mkdtemp(join(tmpdir(), "blobs-"));
  try {
    await mkdir(join(directory, "tmp"), { recursive: true });
    await writeFile(join(directory, "tmp", "partial.abc"), "half a blob");
    const store = await openFsBlobStore(directory);
    assert.deepEqual(await readdir(join(directory, "tmp")), []);
    const hash = await store.put(new TextEncoder().encode("original"));
    await writeFile(join(directory, hash.slice(0, 2), hash), "tampered");
    await assert.rejects(store.get(hash), AssertionError);
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
});

// Runs the blob store contract against the filesystem adapter, plus its crash-safety details.
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, readdir, readFile, rm, writeFile, mkdir } from "node:fs/promises";
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

it("filesystem: putStream stores chunks that hash to the name and refuses others with nothing stored", async () => {
  const directory = await mkdtemp(join(tmpdir(), "blobs-"));
  try {
    const store = await openFsBlobStore(directory);
    const data = randomBytes(3 * 64 * 1024 + 17);
    const hash = createHash("sha256").update(data).digest("hex");
    async function* chunksOf(bytes: Buffer) {
      for (let at = 0; at < bytes.length; at += 64 * 1024) yield bytes.subarray(at, at + 64 * 1024);
    }
    assert.equal(await store.putStream(chunksOf(data), hash), hash);
    assert.deepEqual(Buffer.from((await store.get(hash))!), data);
    assert.equal(await store.putStream(chunksOf(data), hash), hash, "a second put of the same blob is a no-op");

    const other = randomBytes(1000);
    const otherHash = createHash("sha256").update(other).digest("hex");
    await assert.rejects(store.putStream(chunksOf(Buffer.concat([other, Buffer.from("!")])), otherHash), AssertionError);
    assert.equal(await store.has(otherHash), false);
    assert.deepEqual(await readdir(join(directory, "tmp")), [], "the refused temp file is removed");
    await assert.rejects(store.putStream(chunksOf(Buffer.from("forged")), hash), AssertionError, "checked even when the blob is there");
    await assert.rejects(store.putStream(chunksOf(other), "not-a-hash"), AssertionError);
    assert.deepEqual(await store.list(), [hash]);
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
});

it("filesystem: copyTo copies a blob out chunk by chunk, checked against its name", async () => {
  const directory = await mkdtemp(join(tmpdir(), "blobs-"));
  try {
    const store = await openFsBlobStore(directory);
    const data = randomBytes(5 * 64 * 1024 + 3);
    const hash = await store.put(data);
    const out = join(directory, "copy");
    assert.equal(await store.copyTo(hash, out), true);
    assert.deepEqual(await readFile(out), data);
    assert.equal(await store.copyTo("0".repeat(64), join(directory, "absent")), false);
    assert.equal(existsSync(join(directory, "absent")), false);

    await writeFile(join(directory, hash.slice(0, 2), hash), "tampered");
    const second = join(directory, "second");
    await assert.rejects(store.copyTo(hash, second), AssertionError);
    assert.equal(existsSync(second), false);
    assert.equal(existsSync(`${second}.partial`), false);
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
});

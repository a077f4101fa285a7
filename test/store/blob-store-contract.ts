/**
 * The blob store contract: one suite for every BlobStore adapter (filesystem, PostgreSQL).
 */
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { describe, it } from "node:test";
import type { BlobStore } from "../../src/store/ports.js";

/** A blob store under test that can be closed and opened again on the same data. */
export interface BlobStoreSubject {
  open(): Promise<BlobStore & { close(): Promise<void> }>;
  dispose(): Promise<void>;
}

const sha256 = (data: Uint8Array) => createHash("sha256").update(data).digest("hex");

/** Runs the blob store contract against the subjects `createSubject` makes. */
export function runBlobStoreContract(name: string, createSubject: () => Promise<BlobStoreSubject>): void {
  async function withStore(body: (store: BlobStore, subject: BlobStoreSubject) => Promise<void>): Promise<void> {
    const subject = await createSubject();
    try {
      const store = await subject.open();
      try {
        await body(store, subject);
      } finally {
        await store.close();
      }
    } finally {
      await subject.dispose();
    }
  }

  describe(`blob store contract: ${name}`, () => {
    it("names blobs by their sha256 and returns their bytes", () =>
      withStore(async (store) => {
        const data = new TextEncoder().encode("template archive");
        const hash = await store.put(data);
        assert.equal(hash, sha256(data));
        assert.equal(await store.has(hash), true);
        assert.deepEqual(await store.get(hash), data);
      }));

    it("stores empty and large blobs", () =>
      withStore(async (store) => {
        const empty = new Uint8Array(0);
        const large = new Uint8Array(randomBytes(2 * 1024 * 1024));
        const emptyHash = await store.put(empty);
        const largeHash = await store.put(large);
        assert.deepEqual(await store.get(emptyHash), empty);
        assert.deepEqual(await store.get(largeHash), large);
      }));

    it("treats a second put of the same bytes as a no-op", () =>
      withStore(async (store) => {
        const data = new Uint8Array([1, 2, 3]);
        const [a, b] = await Promise.all([store.put(data), store.put(data)]);
        assert.equal(a, b);
        assert.equal(await store.put(data), a);
        assert.deepEqual(await store.list(), [a]);
      }));

    it("answers absent and malformed names without throwing", () =>
      withStore(async (store) => {
        const absent = sha256(new Uint8Array([9]));
        assert.equal(await store.has(absent), false);
        assert.equal(await store.get(absent), null);
        assert.equal(await store.delete(absent), false);
        for (const bad of ["", "../etc/passwd", "ABC", "z".repeat(64), `${absent}x`]) {
          assert.equal(await store.has(bad), false);
          assert.equal(await store.get(bad), null);
          assert.equal(await store.delete(bad), false);
        }
      }));

    it("deletes and lists in hash order", () =>
      withStore(async (store) => {
        const hashes = await Promise.all([1, 2, 3, 4].map((n) => store.put(new Uint8Array([n, n, n]))));
        assert.deepEqual(await store.list(), [...hashes].sort());
        assert.equal(await store.delete(hashes[1]), true);
        assert.equal(await store.delete(hashes[1]), false);
        assert.equal(await store.has(hashes[1]), false);
        assert.deepEqual(await store.list(), [hashes[0], hashes[2], hashes[3]].sort());
      }));

    it("keeps blobs across close and reopen", async () => {
      const subject = await createSubject();
      try {
        const data = new TextEncoder().encode("persisted");
        const first = await subject.open();
        const hash = await first.put(data);
        await first.close();
        const second = await subject.open();
        try {
          assert.deepEqual(await second.get(hash), data);
        } finally {
          await second.close();
        }
      } finally {
        await subject.dispose();
      }
    });
  });
}

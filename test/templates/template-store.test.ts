/**
 * The template store on its own (no service, no lock, no events): recording versions, the bounded
 * manifest cache, lookups of missing blobs, and garbage collection across templates, over the
 * embedded document store and a filesystem blob store in a temporary directory.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { openFsBlobStore, type FsBlobStore } from "../../src/store/fs-blob-store.js";
import { FileBlobs } from "../../src/templates/file-blobs.js";
import { FileTree } from "../../src/templates/file-tree.js";
import { TEMPLATES_COLLECTION, TEMPLATE_VERSIONS_COLLECTION, type StoredTemplate, type StoredTemplateVersion } from "../../src/templates/template-records.js";
import { TemplateStore } from "../../src/templates/template-store.js";
import { openStoreFixture, type StoreFixture } from "../support/store-fixture.js";

const sha = (text: string) => createHash("sha256").update(text).digest("hex");

async function rejects(promise: Promise<unknown>, status: number, code: string): Promise<void> {
  await assert.rejects(promise, (err: { status?: number; code?: string; message?: string }) => {
    assert.equal(err.status, status, `${err.code} ${err.message}`);
    assert.equal(err.code, code, err.message);
    return true;
  });
}

describe("template store", () => {
  let base: StoreFixture;
  let blobs: FsBlobStore;
  let store: TemplateStore;

  before(async () => {
    base = await openStoreFixture("cloud-template-store-");
    blobs = await openFsBlobStore(join(base.dir, "blobs"));
    store = new TemplateStore({
      templates: base.store.collection<StoredTemplate>(TEMPLATES_COLLECTION),
      versions: base.store.collection<StoredTemplateVersion>(TEMPLATE_VERSIONS_COLLECTION, {
        indexes: [{ name: "template_versions_template", field: "templateName" }],
      }),
      blobs,
      fileBlobs: new FileBlobs(blobs),
      clock: base.clock,
      manifestCacheEntriesMax: 2,
    });
  });
  after(() => base.close());

  /** Creates template `name` holding `files` (path → text) as its first version. */
  async function insert(name: string, files: Record<string, string>): Promise<StoredTemplate> {
    const tree = new FileTree([]);
    for (const [path, text] of Object.entries(files)) tree.writeFile(path, new TextEncoder().encode(text));
    await store.storeFiles(tree);
    return store.insertTemplate(name, "", "", tree.toEntries());
  }

  /** Records `files` as a new version of `doc` on top of its current one. */
  async function edit(doc: StoredTemplate, files: Record<string, string>): Promise<StoredTemplate> {
    const current = await store.readManifest(doc.hash, doc.name);
    const tree = new FileTree(current.entries);
    for (const [path, text] of Object.entries(files)) tree.writeFile(path, new TextEncoder().encode(text));
    await store.storeFiles(tree);
    return store.recordVersion(doc, tree.toEntries(), undefined, current.trees);
  }

  it("records versions newest first and reads a version's files, trees and blobs back", async () => {
    const v1 = await insert("alpha", { "config/a.txt": "alpha a" });
    base.clock.advance(1);
    const v2 = await edit(v1, { "config/b.txt": "alpha b" });
    assert.notEqual(v1.hash, v2.hash);
    assert.equal(v2.versionSeq, 2);
    assert.equal(v2.fileCount, 2);
    assert.equal(v2.sizeBytes, "alpha a".length + "alpha b".length);
    assert.equal((await store.load("alpha")).hash, v2.hash, "the template moved to the new version");
    assert.deepEqual(
      (await store.listVersions("alpha")).map((v) => [v.hash, v.seq]),
      [
        [v2.hash, 2],
        [v1.hash, 1],
      ],
    );
    const parsed = await store.readManifest(v2.hash);
    assert.deepEqual(
      parsed.entries.map((e) => e.path),
      ["config", "config/a.txt", "config/b.txt"],
    );
    assert.equal(parsed.trees.size, 2, "root and config/");
    assert.ok(parsed.trees.has(v2.hash));
    assert.deepEqual([...parsed.blobs].sort(), [sha("alpha a"), sha("alpha b")].sort());
    assert.equal(parsed.files.get(sha("alpha b"))?.path, "config/b.txt");
    assert.deepEqual(await store.missingBlobs(parsed), []);
  });

  it("resolves versions and blobs, 404 for what a template does not hold", async () => {
    const doc = await store.load("alpha");
    const [, first] = await store.listVersions("alpha");
    assert.equal(await store.resolveVersion(doc, undefined), doc.hash);
    assert.equal(await store.resolveVersion(doc, first.hash), first.hash);
    await rejects(store.resolveVersion(doc, sha("never a version")), 404, "NOT_FOUND");
    await rejects(store.load("nope"), 404, "NOT_FOUND");
    const root = await store.findBlob("alpha", doc.hash);
    assert.ok("tree" in root && root.tree.byteLength > 0);
    const file = await store.findBlob("alpha", sha("alpha a"));
    assert.ok("entry" in file && file.entry.path === "config/a.txt");
    await rejects(store.findBlob("alpha", sha("alpha b"), first.hash), 404, "NOT_FOUND");
  });

  it("keeps at most manifestCacheEntriesMax parsed manifests, least recently used dropped first", async () => {
    const one = await insert("cache-one", { "one.txt": "cache one" });
    const two = await insert("cache-two", { "two.txt": "cache two" });
    const three = await insert("cache-three", { "three.txt": "cache three" });
    await store.readManifest(one.hash);
    await store.readManifest(two.hash);
    await store.readManifest(one.hash); // one is now the most recently used
    await store.readManifest(three.hash); // evicts two
    for (const doc of [one, two, three]) await blobs.delete(doc.hash);
    assert.equal((await store.readManifest(one.hash)).entries[0].path, "one.txt", "served from the cache without its tree object");
    assert.equal((await store.readManifest(three.hash)).entries[0].path, "three.txt");
    await rejects(store.readManifest(two.hash, "cache-two"), 422, "NO_SNAPSHOT");
  });

  it("lists the tree objects and file blobs of a version that are gone", async () => {
    const doc = await insert("holes", { "dir/kept.txt": "holes kept", "dir/lost.txt": "holes lost" });
    const parsed = await store.readManifest(doc.hash);
    const dirTree = [...parsed.trees].find((t) => t !== doc.hash)!;
    await blobs.delete(sha("holes lost"));
    await blobs.delete(dirTree);
    assert.deepEqual(await store.missingBlobs(parsed), [dirTree, sha("holes lost")]);
  });

  it("collects only what no remaining version of any template uses, and nothing it never referenced", async () => {
    const shared = await insert("gc-a", { "shared.txt": "gc shared", "only-a.txt": "gc only a" });
    await insert("gc-b", { "shared.txt": "gc shared" });
    const foreign = await blobs.put(new TextEncoder().encode("another user of the blob store"));
    await store.deleteTemplate("gc-a");
    assert.equal(await store.find("gc-a"), null);
    assert.deepEqual(await store.listVersions("gc-a"), []);
    assert.equal(await blobs.has(sha("gc only a")), false);
    assert.equal(await blobs.has(shared.hash), false, "the deleted version's root tree");
    assert.equal(await blobs.has(sha("gc shared")), true, "still used by gc-b");
    assert.equal(await blobs.has(foreign), true);
    await rejects(store.readManifest(shared.hash), 422, "NO_SNAPSHOT");
    assert.equal(await store.collectGarbage([(await store.load("gc-b")).hash]), 0, "a current version keeps everything it uses");
  });

  it("deleting a version keeps the trees and blobs the template's other versions share", async () => {
    const v1 = await insert("gc-versions", { "keep/a.txt": "gc keep", "drop.txt": "gc drop v1" });
    const v2 = await edit(v1, { "drop.txt": "gc drop v2" });
    const v1Version = (await store.version("gc-versions", v1.hash))!;
    const keepTree = [...(await store.readManifest(v1.hash)).trees].find((t) => t !== v1.hash)!;
    await store.deleteVersion(v1Version);
    assert.equal(await store.version("gc-versions", v1.hash), null);
    assert.equal(await blobs.has(sha("gc drop v1")), false);
    assert.equal(await blobs.has(v1.hash), false);
    assert.equal(await blobs.has(keepTree), true, "keep/ is unchanged in v2");
    assert.equal(await blobs.has(sha("gc keep")), true);
    assert.deepEqual(await store.missingBlobs(await store.readManifest(v2.hash)), []);
  });
});

/** The daemon's template cache against an in-memory source: LRU eviction by size, integrity, confinement. */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TemplateCache, type FetchedManifest, type TemplateSource } from "../../src/daemon/template-cache.js";
import { FILE_MODE } from "../../src/templates/manifest.js";

const sha = (data: Uint8Array) => createHash("sha256").update(data).digest("hex");

/** A source holding templates of one file each; counts blob fetches and can corrupt them. */
class FakeSource implements TemplateSource {
  readonly files = new Map<string, { path: string; data: Uint8Array }[]>();
  blobFetches = 0;
  corrupt = false;
  add(name: string, files: { path: string; data: string | Uint8Array }[]): void {
    this.files.set(
      name,
      files.map((f) => ({ path: f.path, data: typeof f.data === "string" ? new TextEncoder().encode(f.data) : f.data })),
    );
  }
  async manifest(name: string): Promise<FetchedManifest> {
    const files = this.files.get(name)!;
    return {
      templateName: name,
      hash: `h-${name}`,
      variables: { who: name },
      entries: files.map((f) => ({ path: f.path, mode: FILE_MODE, size: f.data.byteLength, sha256: sha(f.data) })),
    };
  }
  async blob(name: string, sha256: string): Promise<Uint8Array> {
    this.blobFetches++;
    const data = this.files.get(name)!.find((f) => sha(f.data) === sha256)!.data;
    return this.corrupt ? new Uint8Array(data.byteLength) : data;
  }
}

describe("template cache", () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "cloud-template-cache-"));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it("evicts least recently used blobs beyond the size bound, never those just unpacked", async () => {
    const source = new FakeSource();
    source.add("a", [{ path: "a.bin", data: new Uint8Array(600).fill(1) }]);
    source.add("b", [{ path: "b.bin", data: new Uint8Array(600).fill(2) }]);
    const cache = await TemplateCache.open({ directory: join(dir, "lru"), sizeBytesMax: 1000, source });
    await cache.unpack([{ name: "a" }], join(dir, "out-a"));
    await cache.unpack([{ name: "b" }], join(dir, "out-b"));
    assert.deepEqual(cache.status(), { blobCount: 1, sizeBytes: 600, sizeBytesMax: 1000 });
    assert.equal(source.blobFetches, 2);
    await cache.unpack([{ name: "b" }], join(dir, "out-b2"));
    assert.equal(source.blobFetches, 2, "b is still cached");
    await cache.unpack([{ name: "a" }], join(dir, "out-a2"));
    assert.equal(source.blobFetches, 3, "a was evicted");
    const reopened = await TemplateCache.open({ directory: join(dir, "lru"), sizeBytesMax: 1000, source });
    assert.equal(reopened.status().sizeBytes, 600, "a restart indexes what is on disk");
  });

  it("applies layers in order with variables and refuses corrupt blobs and escaping paths", async () => {
    const source = new FakeSource();
    source.add("base", [
      { path: "cfg/x.txt", data: "from base {{who}}" },
      { path: "only-base.txt", data: "b" },
    ]);
    source.add("top", [{ path: "cfg/x.txt", data: "from top {{who}} {{unknown}}" }]);
    const cache = await TemplateCache.open({ directory: join(dir, "layers"), sizeBytesMax: 1 << 20, source });
    await cache.unpack([{ name: "base" }, { name: "top" }], join(dir, "out"));
    assert.equal(await readFile(join(dir, "out", "cfg", "x.txt"), "utf8"), "from top top {{unknown}}");
    assert.equal(await readFile(join(dir, "out", "only-base.txt"), "utf8"), "b");

    source.add("bad", [{ path: "new.txt", data: "fresh" }]);
    source.corrupt = true;
    await assert.rejects(cache.unpack([{ name: "bad" }], join(dir, "out-bad")), /corrupt/);
    source.corrupt = false;
    source.add("escape", [{ path: "../../outside.txt", data: "x" }]);
    await assert.rejects(cache.unpack([{ name: "escape" }], join(dir, "out-esc")), /\.\./);
  });

  it("streams files above the substitution size both ways and fetches a damaged cached copy again", async () => {
    const large = new Uint8Array(200_000).map((_, i) => (i * 31) & 0xff);
    const source = new FakeSource();
    source.add("big", [
      { path: "world/region.mca", data: large },
      { path: "small.txt", data: "hi {{who}}" },
    ]);
    // As the HTTP source does: the body arrives as a stream of pieces.
    const whole = source.blob.bind(source);
    source.blob = async (name: string, sha256: string) => {
      const data = await whole(name, sha256);
      return (async function* () {
        for (let at = 0; at < data.byteLength; at += 7_000) yield data.subarray(at, at + 7_000);
      })() as unknown as Uint8Array;
    };
    const cache = await TemplateCache.open({ directory: join(dir, "stream"), sizeBytesMax: 1 << 20, source, substitutionBytesMax: 1024 });
    const first = await cache.unpack([{ name: "big" }], join(dir, "out-big"));
    assert.equal(first.bytesDownloaded, large.byteLength + "hi {{who}}".length);
    assert.ok((await readFile(join(dir, "out-big", "world", "region.mca"))).equals(large));
    assert.equal(await readFile(join(dir, "out-big", "small.txt"), "utf8"), "hi big");

    const cached = join(dir, "stream", sha(large).slice(0, 2), sha(large));
    const damaged = Buffer.from(large);
    damaged[100_000] ^= 1;
    await writeFile(cached, damaged);
    const second = await cache.unpack([{ name: "big" }], join(dir, "out-big2"));
    assert.equal(second.blobsDownloaded, 1, "only the damaged blob is fetched again");
    assert.ok((await readFile(join(dir, "out-big2", "world", "region.mca"))).equals(large));
    assert.ok((await readFile(cached)).equals(large), "the cache holds the good copy again");
  });
});

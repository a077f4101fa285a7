/**
 * Files above FILE_CHUNK_BYTES in the template service: stored as chunk blobs, read back whole or as
 * a stream, shared across files, collected with their versions, checked by rollback, rehash and the
 * blob route, exported and imported unchanged; and uploads spooled to disk, stored from there.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FILE_CHUNK_BYTES } from "../../src/templates/file-content.js";
import { spoolMultipart, type MultipartSpool } from "../../src/templates/upload-spool.js";
import { buildZip } from "./archive-fixtures.js";
import { openTemplateFixture, type TemplateFixture } from "./template-fixtures.js";

const FILE_BYTES = 2 * FILE_CHUNK_BYTES + 1000;

function patterned(sizeBytes: number, seed: number): Buffer {
  const data = Buffer.alloc(sizeBytes);
  for (let at = 0; at + 4 <= sizeBytes; at += 4096) data.writeUInt32LE((at * 2654435761 + seed) >>> 0, at);
  return data;
}

const sha256 = (data: Uint8Array) => createHash("sha256").update(data).digest("hex");

async function readAll(stream: ReadableStream<Uint8Array>): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  for await (const part of stream) parts.push(part);
  return Buffer.concat(parts);
}

async function spoolOf(directory: string, files: { name: string; data: Uint8Array }[]): Promise<MultipartSpool> {
  const form = new FormData();
  for (const f of files) form.append("file", new Blob([f.data]), f.name);
  const res = new Response(form);
  return spoolMultipart(res.body, res.headers.get("content-type")!, { directory, field: "file" });
}

describe("chunked template files", () => {
  let f: TemplateFixture;
  let spoolDirectory: string;
  const big = patterned(FILE_BYTES, 1);
  before(async () => {
    f = await openTemplateFixture({ unpackedBytesMax: 64 << 20 });
    spoolDirectory = await mkdtemp(join(tmpdir(), "cloud-chunked-spool-"));
    await f.service.create({ name: "maps" });
  });
  after(async () => {
    await f.close();
    await rm(spoolDirectory, { recursive: true, force: true });
  });

  it("stores a large file as chunk blobs and reads it back whole, streamed and through blob()", async () => {
    const before = new Set(await f.blobs.list());
    const change = await f.service.upload("maps", "worlds", [{ fileName: "a.dat", data: big }], false);
    const added = (await f.blobs.list()).filter((b) => !before.has(b));
    // Three chunks, the trees of worlds/ and of the root; no blob of the whole file.
    assert.equal(added.length, 5);
    assert.equal(await f.blobs.has(sha256(big)), false);
    assert.ok(added.includes(sha256(big.subarray(0, FILE_CHUNK_BYTES))));

    const { entry, data } = await f.service.readFile("maps", "worlds/a.dat");
    assert.equal(entry.sha256, sha256(big));
    assert.ok(Buffer.from(data).equals(big));
    assert.ok((await readAll((await f.service.openFile("maps", "worlds/a.dat")).stream)).equals(big));
    assert.ok(Buffer.from(await f.service.blob("maps", sha256(big), change.newHash)).equals(big));
    const manifest = await f.service.manifest("maps");
    assert.deepEqual(
      manifest.entries.find((e) => e.path === "worlds/a.dat"),
      { path: "worlds/a.dat", mode: 0o100644, size: FILE_BYTES, sha256: sha256(big) },
    );
  });

  it("shares chunks between files with the same bytes", async () => {
    const before = (await f.blobs.list()).length;
    await f.service.upload("maps", "copies", [{ fileName: "b.dat", data: Buffer.from(big) }], false);
    // Only the trees of copies/ and the root are new.
    assert.equal((await f.blobs.list()).length, before + 2);
  });

  it("stores a spooled upload from disk, and extracts a spooled ZIP", async () => {
    const other = patterned(FILE_CHUNK_BYTES + 7, 2);
    const zip = buildZip([{ name: "region/r.0.0.mca", data: "region" }]);
    const spool = await spoolOf(spoolDirectory, [
      { name: "c.dat", data: other },
      { name: "pack.zip", data: zip },
    ]);
    try {
      await f.service.upload("maps", "spooled", spool.files, true);
    } finally {
      await spool.dispose();
    }
    const { entry, data } = await f.service.readFile("maps", "spooled/c.dat");
    assert.equal(entry.sha256, sha256(other));
    assert.ok(Buffer.from(data).equals(other));
    assert.equal((await f.service.readText("maps", "spooled/region/r.0.0.mca")).content, "region");
  });

  it("export and import keep the hash of a template with chunked files", async () => {
    const { hash, stream } = await f.service.exportArchive("maps");
    const copy = await f.service.importArchive("maps-copy", stream);
    assert.equal(copy.hash, hash);
    assert.ok(Buffer.from((await f.service.readFile("maps-copy", "worlds/a.dat")).data).equals(big));
  });

  it("a missing chunk is 422 NO_SNAPSHOT on read and rollback, and rehash names it", async () => {
    await f.service.create({ name: "fragile" });
    const lost = patterned(FILE_CHUNK_BYTES + 11, 3);
    const v1 = await f.service.upload("fragile", "", [{ fileName: "lost.dat", data: lost }], false);
    await f.service.writeText("fragile", "other.txt", "v2");
    const tail = sha256(lost.subarray(FILE_CHUNK_BYTES));
    await f.blobs.delete(tail);
    await assert.rejects(f.service.openFile("fragile", "lost.dat"), { status: 422, code: "NO_SNAPSHOT" });
    await assert.rejects(f.service.readFile("fragile", "lost.dat"), { status: 422, code: "NO_SNAPSHOT" });
    await assert.rejects(f.service.openBlob("fragile", sha256(lost)), { status: 422, code: "NO_SNAPSHOT" });
    assert.deepEqual((await f.service.rehash("fragile")).missingBlobs, [tail]);
    await f.service.deleteFile("fragile", "lost.dat");
    await assert.rejects(f.service.rollback("fragile", v1.newHash), { status: 422, code: "NO_SNAPSHOT" });
  });

  it("deleting the last version that holds a chunked file collects its chunks", async () => {
    await f.service.create({ name: "temporary" });
    const only = patterned(FILE_CHUNK_BYTES + 13, 4);
    const v1 = await f.service.upload("temporary", "", [{ fileName: "only.dat", data: only }], false);
    await f.service.deleteFile("temporary", "only.dat");
    const chunks = [sha256(only.subarray(0, FILE_CHUNK_BYTES)), sha256(only.subarray(FILE_CHUNK_BYTES))];
    for (const chunk of chunks) assert.equal(await f.blobs.has(chunk), true);
    await f.service.deleteVersion("temporary", v1.newHash);
    for (const chunk of chunks) assert.equal(await f.blobs.has(chunk), false);
  });
});

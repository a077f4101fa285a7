// Hostile bundles given to the upload (so to verification): traversal and absolute names, links,
// special files, a gzip bomb, garbage, a forged manifest and a blob whose bytes differ from its
// name. Each is refused with 422 INVALID_BUNDLE, and nothing is written: no record, no bundle,
// nothing outside the backup directory, the stores as they were.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { gunzipSync } from "node:zlib";
import tarStream from "tar-stream";
import { BackupService } from "../../src/backup/backup-service.js";
import { deriveBundleKey } from "../../src/backup/bundle-auth.js";
import { DEFAULT_BUNDLE_LIMITS } from "../../src/backup/bundle-reader.js";
import { verifyBundle } from "../../src/backup/bundle-validator.js";
import { applyBundle } from "../../src/backup/restore.js";
import { createLogService } from "../../src/logs/logger.js";
import { systemClock } from "../../src/shared/clock.js";
import { ApiError, AssertionError } from "../../src/shared/errors.js";
import { openLevelDocumentStore, type LevelDocumentStore } from "../../src/store/embedded/level-document-store.js";
import { openFsBlobStore, type FsBlobStore } from "../../src/store/fs-blob-store.js";
import { MemoryKvStore } from "../../src/store/memory/memory-kv-store.js";
import { buildRawTarGz, type RawTarMember } from "../templates/archive-fixtures.js";

const key = deriveBundleKey("hostile-test-cluster", "test key material");

describe("hostile bundles", () => {
  let dir: string;
  let documents: LevelDocumentStore;
  let blobs: FsBlobStore;
  let kv: MemoryKvStore;
  let service: BackupService;
  let valid: Buffer;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "cloud-hostile-backup-"));
    documents = await openLevelDocumentStore({ directory: join(dir, "documents"), ttlSweepIntervalMs: 0 });
    blobs = await openFsBlobStore(join(dir, "blobs"));
    kv = new MemoryKvStore({});
    await documents.collection("users").put({ _id: "u1", username: "admin", tokenVersion: 1 });
    await documents.collection("groups").put({ _id: "lobby", name: "lobby" });
    await blobs.put(Buffer.from("template bytes"));
    service = new BackupService({
      documents,
      kv,
      blobs,
      directory: join(dir, "backups"),
      retentionCount: 5,
      origin: { nodeId: () => "node-1", softwareVersion: "test", profile: "development", documentStore: "embedded" },
      bundleKey: () => key,
      clock: systemClock,
      logger: createLogService({ level: "ERROR", format: "JSON" }, { write: () => undefined }).logger("test"),
      limits: { ...DEFAULT_BUNDLE_LIMITS, unpackedBytesMax: 1024 * 1024, blobBytesMax: 64 * 1024 },
    });
    await service.start();
    const record = await service.create();
    const { stream } = await service.openDownload(record.id);
    valid = Buffer.from(await new Response(stream).arrayBuffer());
    await service.delete(record.id);
  });
  after(async () => {
    await kv.close();
    await documents.close();
    await rm(dir, { recursive: true, force: true });
  });

  const bodyOf = (bytes: Uint8Array) => new Response(bytes).body;

  async function refuse(bytes: Uint8Array, reason: RegExp): Promise<void> {
    const documentsBefore = await documents.collection("groups").find();
    await assert.rejects(service.upload(bodyOf(bytes)), (err: unknown) => {
      assert.ok(err instanceof ApiError, String(err));
      assert.equal(err.status, 422);
      assert.equal(err.code, "INVALID_BUNDLE");
      assert.match(err.message, reason);
      return true;
    });
    assert.deepEqual(await service.list(), []);
    assert.deepEqual(await readdir(join(dir, "backups", "tmp")), [], "the spooled upload is removed");
    assert.deepEqual((await readdir(join(dir, "backups"))).sort(), ["tmp"]);
    assert.ok(!existsSync(join(dir, "evil")) && !existsSync("/tmp/evil-backup-entry"));
    assert.deepEqual(await documents.collection("groups").find(), documentsBefore);
    assert.equal((await blobs.list()).length, 1);
  }

  /** The valid bundle's entries, changed by `edit`, packed again. */
  async function repack(edit: (entries: { name: string; type: string; data: Buffer }[]) => void): Promise<Buffer> {
    const entries: { name: string; type: string; data: Buffer }[] = [];
    const extract = tarStream.extract();
    const done = new Promise<void>((resolve, reject) => {
      extract.on("entry", (header, stream, next) => {
        const chunks: Buffer[] = [];
        stream.on("data", (c: unknown) => chunks.push(c as Buffer));
        stream.on("end", () => {
          entries.push({ name: header.name, type: header.type ?? "file", data: Buffer.concat(chunks) });
          next();
        });
      });
      extract.on("finish", resolve);
      extract.on("error", reject);
    });
    extract.end(gunzipSync(valid));
    await done;
    edit(entries);
    return buildRawTarGz(entries.map((e): RawTarMember => ({ name: e.name, typeflag: e.type === "directory" ? "5" : "0", data: e.data })));
  }

  it("accepts the untouched bundle (the cases below differ from it in one way each)", async () => {
    const record = await service.upload(bodyOf(valid));
    assert.equal((await service.verify(record.id)).valid, true);
    await service.delete(record.id);
    const repacked = await repack(() => undefined);
    const again = await service.upload(bodyOf(repacked));
    await service.delete(again.id);
  });

  it("refuses traversal, absolute names and names outside the layout", async () => {
    await refuse(buildRawTarGz([{ name: "../evil", data: "x" }]), /not an entry of a backup bundle/);
    await refuse(buildRawTarGz([{ name: "/tmp/evil-backup-entry", data: "x" }]), /not an entry of a backup bundle/);
    await refuse(buildRawTarGz([{ name: "documents/../../evil.ndjson", data: "x" }]), /not an entry of a backup bundle/);
    await refuse(await repack((entries) => entries.push({ name: "documents/extra.txt", type: "file", data: Buffer.from("x") })), /not an entry/);
  });

  it("refuses links and special files", async () => {
    await refuse(buildRawTarGz([{ name: "documents/users.ndjson", typeflag: "2", linkName: "/etc/passwd" }]), /link/);
    await refuse(buildRawTarGz([{ name: "documents/users.ndjson", typeflag: "1", linkName: "manifest.json" }]), /link/);
    await refuse(buildRawTarGz([{ name: "documents/users.ndjson", typeflag: "6" }]), /not a regular file/);
  });

  it("stops a gzip bomb at the bound and refuses garbage and truncation", async () => {
    await refuse(buildRawTarGz([{ name: "documents/users.ndjson", data: Buffer.alloc(8 * 1024 * 1024, 0x20) }]), /unpacks to more than/);
    await refuse(buildRawTarGz([{ name: `blobs/${"0".repeat(64)}`, data: Buffer.alloc(128 * 1024) }]), /larger than a blob/);
    await refuse(Buffer.from("this is not a bundle at all"), /gzip/);
    await refuse(valid.subarray(0, Math.floor(valid.byteLength / 2)), /gzip|malformed|missing|manifest/);
  });

  it("refuses a forged manifest, a part that differs from it and a blob that differs from its name", async () => {
    await refuse(
      await repack((entries) => {
        const manifest = entries.find((e) => e.name === "manifest.json")!;
        const parsed = JSON.parse(manifest.data.toString());
        parsed.collections.push({ name: "ghosts", documentCount: 1, file: "documents/ghosts.ndjson", sizeBytes: 10, sha256: "0".repeat(64) });
        manifest.data = Buffer.from(JSON.stringify(parsed));
      }),
      /missing file documents\/ghosts.ndjson/,
    );
    await refuse(
      await repack((entries) => {
        const manifest = entries.find((e) => e.name === "manifest.json")!;
        manifest.data = Buffer.from(JSON.stringify({ ...JSON.parse(manifest.data.toString()), format: "other/9" }));
      }),
      /manifest\.json/,
    );
    await refuse(
      await repack((entries) => {
        const groups = entries.find((e) => e.name === "documents/groups.ndjson")!;
        groups.data = Buffer.from(groups.data.toString().replace("lobby", "lobbz"));
      }),
      /checksum mismatch in documents\/groups.ndjson/,
    );
    await refuse(
      await repack((entries) => {
        const blob = entries.find((e) => /^blobs\/[0-9a-f]{64}$/.test(e.name))!;
        blob.data = Buffer.from("other bytes");
      }),
      /checksum mismatch in blobs\//,
    );
    await refuse(
      await repack((entries) => {
        const users = entries.findIndex((e) => e.name === "documents/users.ndjson");
        entries.splice(users, 1);
      }),
      /missing collection users|missing file documents\/users.ndjson/,
    );
    await refuse(
      await repack((entries) =>
        entries.splice(
          entries.findIndex((e) => e.name === "manifest.json"),
          1,
        ),
      ),
      /missing file manifest.json/,
    );
    const hash = createHash("sha256").update("x").digest("hex");
    await refuse(await repack((entries) => entries.push({ name: `blobs/${hash}`, type: "file", data: Buffer.from("x") })), /not listed/);
  });

  it("reading for a restore refuses a collection outside the allowlist, whatever the manifest says", async () => {
    const validPath = join(dir, "valid-allowlist.tar.gz");
    const plantedPath = join(dir, "planted.tar.gz");
    await writeFile(validPath, valid);
    const { manifest } = await verifyBundle(validPath, null);
    assert.ok(manifest);
    await writeFile(
      plantedPath,
      await repack((entries) =>
        entries.splice(
          entries.findIndex((e) => e.name === "kv/"),
          0,
          { name: "documents/system_secrets.ndjson", type: "file", data: Buffer.from('{"_id":"jwt-signing-key","value":"planted"}\n') },
        ),
      ),
    );
    const groupsBefore = await documents.collection("groups").find();
    try {
      await assert.rejects(
        applyBundle(plantedPath, manifest, { datastores: true, filesystem: false }, { documents, kv, blobs, clock: systemClock }, join(dir, "rollback-s")),
        /system_secrets/,
      );
      assert.deepEqual(await documents.collection("system_secrets").find(), [], "nothing planted");
      assert.deepEqual(await documents.collection("groups").find(), groupsBefore);
    } finally {
      await rm(validPath, { force: true });
      await rm(plantedPath, { force: true });
    }
  });

  it("applying checks every blob against its name again: a bundle changed after verification stores no forged blob", async () => {
    const validPath = join(dir, "valid.tar.gz");
    const forgedPath = join(dir, "forged.tar.gz");
    await writeFile(validPath, valid);
    const { manifest } = await verifyBundle(validPath, null);
    assert.ok(manifest);
    await writeFile(
      forgedPath,
      await repack((entries) => {
        const blob = entries.find((e) => /^blobs\/[0-9a-f]{64}$/.test(e.name))!;
        blob.data = Buffer.from("forged bytes");
      }),
    );
    const [held] = await blobs.list();
    const targets = { documents, kv, blobs, clock: systemClock };
    const parts = { datastores: false, filesystem: true };
    try {
      // The blob is held already: its bytes are still read and checked.
      await assert.rejects(applyBundle(forgedPath, manifest, parts, targets, join(dir, "rollback-a")), AssertionError);
      assert.deepEqual(await blobs.list(), [held]);
      // Not held: streamed to a temp file, which is removed, and nothing is stored.
      await blobs.delete(held);
      await assert.rejects(applyBundle(forgedPath, manifest, parts, targets, join(dir, "rollback-b")), AssertionError);
      assert.deepEqual(await blobs.list(), []);
      assert.deepEqual(await readdir(join(dir, "blobs", "tmp")), []);
      // The untouched bundle stores it again.
      const applied = await applyBundle(validPath, manifest, parts, targets, join(dir, "rollback-c"));
      assert.equal(applied.entryCount, 1);
      assert.deepEqual(await blobs.list(), [held]);
      assert.equal(Buffer.from((await blobs.get(held))!).toString(), "template bytes");
    } finally {
      if (!(await blobs.has(held))) await blobs.put(Buffer.from("template bytes"));
      await rm(validPath, { force: true });
      await rm(forgedPath, { force: true });
    }
  });
});

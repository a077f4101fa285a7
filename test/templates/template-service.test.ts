/** The template service: content addressing, versions, rollback, garbage collection and the files API. */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { DEFAULT_ARCHIVE_LIMITS } from "../../src/templates/archive-limits.js";
import { buildRawTarGz, buildZip, collect, unpackTarBytes } from "./archive-fixtures.js";
import { openTemplateFixture, type TemplateFixture } from "./template-fixtures.js";

async function rejects(promise: Promise<unknown>, status: number, code: string, message?: RegExp): Promise<void> {
  await assert.rejects(promise, (err: { status?: number; code?: string; message?: string }) => {
    assert.equal(err.status, status, `${err.code} ${err.message}`);
    assert.equal(err.code, code, err.message);
    if (message) assert.match(err.message ?? "", message);
    return true;
  });
}

describe("template service", () => {
  let f: TemplateFixture;
  before(async () => {
    f = await openTemplateFixture({ entriesMax: 100, unpackedBytesMax: 1 << 20 });
  });
  after(() => f.close());

  it("creates templates under the naming rules and hides synthetic ones from the list", async () => {
    const lobby = await f.service.create({ name: "lobby", description: "Lobby", platform: "paper" });
    assert.equal(lobby.sizeBytes, 0);
    assert.match(lobby.hash, /^[0-9a-f]{64}$/);
    await f.service.create({ name: "_module-plugins-x" });
    for (const bad of ["Lobby", "-x", "a b", "a".repeat(33), "../x", ""]) await rejects(f.service.create({ name: bad }), 422, "VALIDATION_ERROR");
    await rejects(f.service.create({ name: "lobby" }), 409, "CONFLICT");
    assert.deepEqual(
      (await f.service.list()).map((t) => t.name),
      ["lobby"],
    );
    await rejects(f.service.delete("_module-plugins-x"), 400, "PROTECTED");
    await rejects(f.service.get("nope"), 404, "NOT_FOUND", /^Template not found: nope$/);
  });

  it("stores each distinct file once and derives the hash from the manifest only", async () => {
    const t = await f.service.create({ name: "dedupe" });
    const first = await f.service.writeText("dedupe", "a/one.txt", "same");
    await f.service.writeText("dedupe", "b/two.txt", "same");
    const blobsBefore = (await f.blobs.list()).length;
    const same = await f.service.writeText("dedupe", "b/two.txt", "same");
    assert.equal(same.changed, false);
    assert.equal((await f.blobs.list()).length, blobsBefore);
    assert.notEqual(first.oldHash, first.newHash);
    assert.equal(first.oldHash, t.hash);
    // A second template with the same files has the same hash.
    await f.service.create({ name: "dedupe2" });
    await f.service.writeText("dedupe2", "b/two.txt", "same");
    const twin = await f.service.writeText("dedupe2", "a/one.txt", "same");
    assert.equal(twin.newHash, (await f.service.get("dedupe")).hash);
    const listing = await f.service.listFiles("dedupe", "");
    assert.deepEqual(
      listing.entries.map((e) => [e.name, e.type]),
      [
        ["a", "directory"],
        ["b", "directory"],
      ],
    );
  });

  it("a one-file edit stores that file and the tree objects on its path only", async () => {
    await f.service.create({ name: "deep" });
    for (let d = 0; d < 5; d++) for (let i = 0; i < 5; i++) await f.service.writeText("deep", `d${d}/sub/f${i}.txt`, `deep ${d} ${i}`);
    const before = new Set(await f.blobs.list());
    await f.service.writeText("deep", "d3/sub/f1.txt", "changed");
    const added = (await f.blobs.list()).filter((b) => !before.has(b));
    // The file, then the trees of d3/sub, d3 and the root.
    assert.equal(added.length, 4);
  });

  it("records a version per change (newest first), publishes TEMPLATE_UPDATED, and rolls back", async () => {
    await f.service.create({ name: "survival" });
    const v1 = await f.service.writeText("survival", "server.properties", "motd=one");
    f.clock.advance(1000);
    const v2 = await f.service.writeText("survival", "server.properties", "motd=two");
    const versions = await f.service.listVersions("survival");
    assert.deepEqual(
      versions.slice(0, 2).map((v) => v.hash),
      [v2.newHash, v1.newHash],
    );
    assert.equal(versions.length, 3);
    assert.deepEqual(f.events.ofType("TEMPLATE_UPDATED").at(-1), { templateName: "survival", oldHash: v1.newHash, newHash: v2.newHash });

    const back = await f.service.rollback("survival", v1.newHash);
    assert.equal(back.newHash, v1.newHash);
    assert.equal((await f.service.readText("survival", "server.properties")).content, "motd=one");
    assert.equal((await f.service.readText("survival", "server.properties", v2.newHash)).content, "motd=two");
    assert.deepEqual(f.events.ofType("TEMPLATE_UPDATED").at(-1), { templateName: "survival", oldHash: v2.newHash, newHash: v1.newHash });

    await rejects(f.service.rollback("survival", undefined), 400, "BAD_REQUEST");
    await rejects(f.service.rollback("survival", "  "), 400, "BAD_REQUEST");
    await rejects(f.service.rollback("ghost", v1.newHash), 404, "NOT_FOUND", /Template not found: ghost/);
    await rejects(f.service.rollback("survival", "0".repeat(64)), 404, "NOT_FOUND");
  });

  it("answers 422 NO_SNAPSHOT when a version's blob is missing", async () => {
    await f.service.create({ name: "broken" });
    const v1 = await f.service.writeText("broken", "lost.txt", "unique content of broken v1");
    await f.service.writeText("broken", "lost.txt", "v2");
    const { data } = await f.service.readFile("broken", "lost.txt", v1.newHash);
    const { createHash } = await import("node:crypto");
    await f.blobs.delete(createHash("sha256").update(data).digest("hex"));
    await rejects(f.service.rollback("broken", v1.newHash), 422, "NO_SNAPSHOT");
  });

  it("deleting a version collects only the blobs no other version uses", async () => {
    await f.service.create({ name: "gc" });
    await f.service.writeText("gc", "keep.txt", "kept everywhere");
    const v2 = await f.service.writeText("gc", "only-v2.txt", "gc: only in v2");
    const v3 = await f.service.deleteFile("gc", "only-v2.txt");
    const onlyV2 = (await f.service.manifest("gc", v2.newHash)).entries.find((e) => e.path === "only-v2.txt")!.sha256;
    const kept = (await f.service.manifest("gc", v3.newHash)).entries.find((e) => e.path === "keep.txt")!.sha256;
    await rejects(f.service.deleteVersion("gc", v3.newHash), 409, "CONFLICT");
    await f.service.deleteVersion("gc", v2.newHash);
    assert.equal(await f.blobs.has(onlyV2), false);
    assert.equal(await f.blobs.has(v2.newHash), false, "manifest blob collected");
    assert.equal(await f.blobs.has(kept), true);
    await rejects(f.service.deleteVersion("gc", v2.newHash), 404, "NOT_FOUND");
  });

  it("files API: mkdir, rename, delete, upload with extract, extract, and confinement", async () => {
    await f.service.create({ name: "files" });
    await f.service.mkdir("files", "plugins/config");
    await f.service.upload("files", "plugins", [{ fileName: "a.jar", data: new Uint8Array([0, 1, 2]) }], false);
    await f.service.rename("files", "plugins/a.jar", "plugins/b.jar");
    assert.equal((await f.service.readFile("files", "plugins/b.jar")).data.byteLength, 3);
    await rejects(f.service.readText("files", "plugins/b.jar"), 422, "NOT_TEXT");
    const zip = buildZip([
      { name: "world/", unixMode: 0o040755 },
      { name: "world/level.dat", data: "level" },
    ]);
    await f.service.upload("files", "", [{ fileName: "world.zip", data: zip }], true);
    assert.equal((await f.service.readText("files", "world/level.dat")).content, "level");
    await f.service.upload("files", "archives", [{ fileName: "w.zip", data: zip }], false);
    await f.service.extract("files", "archives/w.zip");
    assert.equal((await f.service.readText("files", "archives/world/level.dat")).content, "level");
    await f.service.deleteFile("files", "archives");
    await rejects(f.service.readFile("files", "archives/w.zip"), 404, "NOT_FOUND");

    const before = await f.service.get("files");
    const versionsBefore = (await f.service.listVersions("files")).length;
    for (const bad of ["../x", "/etc/passwd", "a\\b", "a\u0000b", "x".repeat(300)]) {
      await rejects(f.service.writeText("files", bad, "x"), 422, "INVALID_PATH");
      await rejects(f.service.mkdir("files", bad), 422, "INVALID_PATH");
      await rejects(f.service.rename("files", "plugins", bad), 422, "INVALID_PATH");
      await rejects(f.service.upload("files", "", [{ fileName: bad, data: new Uint8Array(1) }], false), 422, "INVALID_PATH");
    }
    const hostile = [
      buildZip([
        { name: "ok.txt", data: "fine" },
        { name: "../evil.txt", data: "x" },
      ]),
      buildZip([
        { name: "ok.txt", data: "fine" },
        { name: "link", data: "/etc", unixMode: 0o120777 },
      ]),
      buildZip([{ name: "bomb", data: Buffer.alloc(2 << 20) }]),
    ];
    for (const data of hostile) {
      await assert.rejects(f.service.upload("files", "", [{ fileName: "h.zip", data }], true), (err: { status?: number; code?: string }) => {
        assert.equal(err.status, 422);
        assert.match(err.code ?? "", /^INVALID_(PATH|ARCHIVE)$/);
        return true;
      });
    }
    assert.equal((await f.service.get("files")).hash, before.hash, "nothing written");
    assert.equal((await f.service.listVersions("files")).length, versionsBefore);
    await rejects(f.service.readFile("files", "ok.txt"), 404, "NOT_FOUND");
  });

  it("variables, scan, search and inheritance", async () => {
    await f.service.create({ name: "base" });
    await f.service.create({ name: "base-paper" });
    await f.service.create({ name: "game", platform: "paper" });
    await f.service.writeText("game", "server.properties", "motd={{ motd }}\nmax-players={{maxPlayers}}\n");
    await f.service.replaceVariables("game", { motd: "Hello" });
    assert.deepEqual(await f.service.variables("game"), { motd: "Hello" });
    const scan = await f.service.scanVariables("game");
    assert.deepEqual(
      scan.variables.map((v) => [v.name, v.defined, v.files]),
      [
        ["maxPlayers", false, ["server.properties"]],
        ["motd", true, ["server.properties"]],
      ],
    );
    const hits = await f.service.search("game", "MAX-PLAYERS", 10);
    assert.deepEqual(hits.results, [{ path: "server.properties", line: 2, preview: "max-players={{maxPlayers}}" }]);
    assert.deepEqual((await f.service.search("game", "server", 1)).results, [{ path: "server.properties" }]);
    assert.deepEqual(
      (await f.service.inheritance("game")).chain.map((l) => l.name),
      ["base", "base-paper", "game"],
    );
    await f.service.delete("base-paper");
    assert.deepEqual(
      (await f.service.inheritance("game")).chain.map((l) => l.name),
      ["base", "game"],
    );
    await rejects(f.service.replaceVariables("game", { "bad name": "x" }), 422, "VALIDATION_ERROR");
  });

  it("export then import reproduces the same hash; hostile imports write nothing", async () => {
    const exported = await f.service.exportArchive("files");
    const { hash } = exported;
    const archive = await collect(exported.stream);
    assert.ok((await unpackTarBytes(archive, DEFAULT_ARCHIVE_LIMITS)).length > 0);
    const imported = await f.service.importArchive("files-copy", archive, { description: "copy" });
    assert.equal(imported.hash, hash);
    await rejects(f.service.importArchive("files-copy", archive), 409, "CONFLICT");
    await rejects(f.service.importArchive("Bad_Name", archive), 422, "VALIDATION_ERROR");
    await rejects(f.service.importArchive("x".repeat(33), archive), 422, "VALIDATION_ERROR");
    for (const bad of [
      buildRawTarGz([
        { name: "ok.txt", data: "x" },
        { name: "l", typeflag: "2", linkName: "/etc/shadow" },
      ]),
      buildRawTarGz([
        { name: "ok.txt", data: "x" },
        { name: "h", typeflag: "1", linkName: "ok.txt" },
      ]),
      buildRawTarGz([{ name: "../../x", data: "x" }]),
      buildRawTarGz([{ name: "/abs", data: "x" }]),
      buildRawTarGz([{ name: "big", data: Buffer.alloc(2 << 20) }]),
    ]) {
      await assert.rejects(f.service.importArchive("hostile", bad), (err: { status?: number }) => err.status === 422);
    }
    await rejects(f.service.get("hostile"), 404, "NOT_FOUND");
  });
});

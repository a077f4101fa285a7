/**
 * tar.gz and ZIP handling: round trips, every hostile entry refused before anything is returned, and
 * the archives common tools write (ZIP64, data descriptors, streamed ZIPs) read.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { promisify } from "node:util";
import { gzipSync } from "node:zlib";
import yazl from "yazl";
import { DEFAULT_ARCHIVE_LIMITS, type ArchiveLimits } from "../../src/templates/archive-limits.js";
import { normalizeTemplatePath } from "../../src/wire/template-paths.js";
import { buildRawTarGz, buildZip, collect, packTarGzBytes, unpackTarBytes, unpackZipOf } from "./archive-fixtures.js";

const limits: ArchiveLimits = DEFAULT_ARCHIVE_LIMITS;
const readTarGz = unpackTarBytes;
const readZip = unpackZipOf;
const run = promisify(execFile);

function refusesNow(fn: () => unknown, pattern: RegExp): void {
  assert.throws(fn, (err: { status?: number; message?: string }) => {
    assert.equal(err.status, 422, err.message);
    assert.match(err.message ?? "", pattern);
    return true;
  });
}

async function refuses(fn: () => Promise<unknown>, pattern: RegExp): Promise<void> {
  await assert.rejects(fn, (err: { status?: number; message?: string }) => {
    assert.equal(err.status, 422, err.message);
    assert.match(err.message ?? "", pattern);
    return true;
  });
}

/** True when Debian's `zip` is installed (the tests that drive it skip otherwise). */
async function hasZipTool(): Promise<boolean> {
  return run("zip", ["-v"]).then(
    () => true,
    () => false,
  );
}

describe("template paths", () => {
  it("accept plain relative paths and refuse everything that could leave the template", () => {
    assert.equal(normalizeTemplatePath("plugins/a.jar", "path"), "plugins/a.jar");
    assert.equal(normalizeTemplatePath("./x/y/", "e", { archive: true }), "x/y");
    assert.equal(normalizeTemplatePath("", "path", { allowRoot: true }), "");
    for (const bad of ["../x", "a/../../b", "/etc/passwd", "C:/x", "a\\b", "a\u0000b", "a//b", "./a", "a/./b", "x".repeat(241), `${"y".repeat(101)}/z`, ""]) {
      refusesNow(() => normalizeTemplatePath(bad, "path"), /path/);
    }
  });
});

describe("tar.gz", () => {
  it("round-trips files, directories, modes and long (PAX) paths", async () => {
    const long = `${"d".repeat(90)}/${"e".repeat(90)}/${"f".repeat(50)}.txt`;
    const archive = await packTarGzBytes([
      { path: "config", kind: "dir", mode: 0o755 },
      { path: "config/server.properties", kind: "file", mode: 0o644, data: Buffer.from("motd={{motd}}\n") },
      { path: "start.sh", kind: "file", mode: 0o755, data: Buffer.from("#!/bin/sh\n") },
      { path: long, kind: "file", mode: 0o644, data: Buffer.alloc(1000, 7) },
    ]);
    const entries = await readTarGz(archive, limits);
    assert.deepEqual(
      entries.map((e) => [e.path, e.kind, e.mode & 0o777]),
      [
        ["config", "dir", 0o755],
        ["config/server.properties", "file", 0o644],
        ["start.sh", "file", 0o755],
        [long, "file", 0o644],
      ],
    );
    assert.equal(Buffer.from(entries[1].data).toString(), "motd={{motd}}\n");
    assert.equal(entries[3].data.byteLength, 1000);
  });

  it("refuses symlinks, hard links, devices, traversal, absolute paths and backslashes", async () => {
    await refuses(() => readTarGz(buildRawTarGz([{ name: "link", typeflag: "2", linkName: "/etc/passwd" }]), limits), /link/);
    await refuses(() => readTarGz(buildRawTarGz([{ name: "hard", typeflag: "1", linkName: "x" }]), limits), /link/);
    await refuses(() => readTarGz(buildRawTarGz([{ name: "dev", typeflag: "3" }]), limits), /regular file/);
    await refuses(() => readTarGz(buildRawTarGz([{ name: "../escape.txt", data: "x" }]), limits), /\.\./);
    await refuses(() => readTarGz(buildRawTarGz([{ name: "/abs.txt", data: "x" }]), limits), /absolute/);
    await refuses(() => readTarGz(buildRawTarGz([{ name: "a\\b.txt", data: "x" }]), limits), /backslash/);
  });

  it("refuses a NUL or an over-long name in a PAX path record", async () => {
    const pax = (value: string) => {
      const body = ` path=${value}\n`;
      let length = body.length + 2;
      while (`${length}${body}`.length !== length) length++;
      return `${length}${body}`;
    };
    await refuses(
      () =>
        readTarGz(
          buildRawTarGz([
            { name: "PaxHeader", typeflag: "x", data: pax("a\u0000b") },
            { name: "x", data: "1" },
          ]),
          limits,
        ),
      /NUL|control/,
    );
    await refuses(
      () =>
        readTarGz(
          buildRawTarGz([
            { name: "PaxHeader", typeflag: "x", data: pax("n".repeat(300)) },
            { name: "x", data: "1" },
          ]),
          limits,
        ),
      /longer/,
    );
  });

  it("bounds entry count and unpacked size (a gzip bomb stops while inflating)", async () => {
    const many = buildRawTarGz(Array.from({ length: 11 }, (_, i) => ({ name: `f${i}`, data: "x" })));
    await refuses(() => readTarGz(many, { entriesMax: 10, unpackedBytesMax: 1 << 20 }), /more than 10 entries/);
    const bomb = buildRawTarGz([{ name: "zeros", data: Buffer.alloc(8 << 20) }]);
    assert.ok(bomb.byteLength < 64 * 1024);
    await refuses(() => readTarGz(bomb, { entriesMax: 10, unpackedBytesMax: 1 << 20 }), /more than/);
    await refuses(() => readTarGz(gzipSync(Buffer.alloc(16 << 20)), { entriesMax: 10, unpackedBytesMax: 1 << 20 }), /more than/);
  });
});

describe("zip", () => {
  it("reads stored and deflated entries and directories", async () => {
    const entries = await readZip(
      buildZip([
        { name: "plugins/", unixMode: 0o040755 },
        { name: "plugins/a.txt", data: "alpha", method: 0 },
        { name: "plugins/b.txt", data: "beta".repeat(1000), method: 8 },
      ]),
      limits,
    );
    assert.deepEqual(
      entries.map((e) => [e.path, e.kind, e.data.byteLength]),
      [
        ["plugins", "dir", 0],
        ["plugins/a.txt", "file", 5],
        ["plugins/b.txt", "file", 4000],
      ],
    );
  });

  it("refuses symlinks, traversal, absolute paths, backslashes, NUL and over-long names", async () => {
    await refuses(() => readZip(buildZip([{ name: "link", data: "/etc/passwd", unixMode: 0o120777 }]), limits), /link/);
    await refuses(() => readZip(buildZip([{ name: "../../x", data: "x" }]), limits), /\.\./);
    await refuses(() => readZip(buildZip([{ name: "/x", data: "x" }]), limits), /absolute/);
    await refuses(() => readZip(buildZip([{ name: "a\\..\\x", data: "x" }]), limits), /backslash/);
    await refuses(() => readZip(buildZip([{ name: "a\u0000b", data: "x" }]), limits), /NUL/);
    await refuses(() => readZip(buildZip([{ name: "q".repeat(300), data: "x" }]), limits), /longer/);
  });

  it("stops a zip bomb: entries inflating past their declared size or past the total bound", async () => {
    const liar = buildZip([{ name: "small.txt", data: Buffer.alloc(10 << 20), declaredBytes: 100 }]);
    await refuses(() => readZip(liar, limits), /beyond its declared size/);
    const big = buildZip(Array.from({ length: 3 }, (_, i) => ({ name: `z${i}`, data: Buffer.alloc(1 << 20) })));
    await refuses(() => readZip(big, { entriesMax: 100, unpackedBytesMax: 2 << 20 }), /more than/);
    await refuses(() => readZip(big, { entriesMax: 2, unpackedBytesMax: 64 << 20 }), /more than 2 entries/);
  });

  it("reads what streaming zippers write: data descriptors and ZIP64 records (yazl)", async () => {
    const text = Buffer.from("motd={{motd}}\n".repeat(5000));
    const binary = Buffer.alloc(300_000);
    for (let i = 0; i < binary.length; i++) binary[i] = (i * 2654435761) >>> 24;
    for (const forceZip64Format of [false, true]) {
      const zip = new yazl.ZipFile();
      zip.addEmptyDirectory("config/", { mode: 0o040755 });
      // A stream's size is unknown when its header is written: yazl marks it with a data descriptor.
      zip.addReadStream(Readable.from([text.subarray(0, 1000), text.subarray(1000)]), "config/server.properties", { forceZip64Format, mode: 0o100640 });
      zip.addBuffer(binary, "plugins/a.jar", { forceZip64Format, compress: false, mode: 0o100644 });
      zip.end({ forceZip64Format, comment: "" });
      const entries = await readZip(await collect(zip.outputStream as AsyncIterable<Uint8Array>), limits);
      assert.deepEqual(
        entries.map((e) => [e.path, e.kind, e.mode, e.data.byteLength]),
        [
          ["config", "dir", 0o755, 0],
          ["config/server.properties", "file", 0o640, text.byteLength],
          ["plugins/a.jar", "file", 0o644, binary.byteLength],
        ],
        `forceZip64Format ${forceZip64Format}`,
      );
      assert.ok(Buffer.from(entries[1].data).equals(text));
      assert.ok(Buffer.from(entries[2].data).equals(binary));
    }
  });

  it("reads ZIPs written by Debian's zip: forced data descriptors, forced ZIP64, and a ZIP streamed to stdout", async (context) => {
    if (!(await hasZipTool())) {
      context.skip("zip is not installed");
      return;
    }
    const dir = await mkdtemp(join(tmpdir(), "cloud-zip-tool-"));
    try {
      await writeFile(join(dir, "a.txt"), "alpha {{v}}\n".repeat(2000));
      await writeFile(join(dir, "b.bin"), Buffer.alloc(70_000, 7));
      const expected = [
        ["a.txt", "file", "alpha {{v}}\n".length * 2000],
        ["b.bin", "file", 70_000],
      ];
      // (Not -fd with -fz together: Info-ZIP 3.0 writes a central directory offset that its own unzip rejects.)
      for (const flags of [["-fd"], ["-fz"]]) {
        const archive = join(dir, `out${flags.join("")}.zip`);
        await run("zip", ["-q", "-X", ...flags, archive, "a.txt", "b.bin"], { cwd: dir });
        const entries = await readZip({ path: archive }, limits);
        assert.deepEqual(
          entries.map((e) => [e.path, e.kind, e.data.byteLength]),
          expected,
          flags.join(" "),
        );
      }
      // Written to a pipe, zip cannot seek back: every entry gets a data descriptor (and ZIP64 fields).
      const streamed = await new Promise<Buffer>((resolve, reject) => {
        const child = execFile("zip", ["-q", "-X", "-", "a.txt", "b.bin"], { cwd: dir, encoding: "buffer", maxBuffer: 16 << 20 }, (err, stdout) =>
          err ? reject(err) : resolve(stdout),
        );
        child.stdin?.end();
      });
      assert.equal(streamed.readUInt16LE(6) & 0x8, 0x8, "the first entry has a data descriptor");
      const entries = await readZip(streamed, limits);
      assert.deepEqual(
        entries.map((e) => [e.path, e.kind, e.data.byteLength]),
        expected,
      );
      assert.equal(Buffer.from(entries[0].data).toString(), "alpha {{v}}\n".repeat(2000));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("refuses a corrupted entry (CRC mismatch) and something that is not a ZIP", async () => {
    const zip = buildZip([{ name: "a.txt", data: "alpha alpha", method: 0 }]);
    zip[30 + "a.txt".length] ^= 0xff; // the first stored byte
    await refuses(() => readZip(zip, limits), /CRC mismatch/);
    await refuses(() => readZip(Buffer.from("PK\u0003\u0004 not really"), limits), /ZIP/);
  });
});

/** tar.gz and ZIP handling: round trips, and every hostile entry refused before anything is returned. */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { gzipSync } from "node:zlib";
import { DEFAULT_ARCHIVE_LIMITS, type ArchiveLimits } from "../../src/templates/archive-limits.js";
import { readTarGz, writeTarGz } from "../../src/templates/tar.js";
import { readZip } from "../../src/templates/zip.js";
import { normalizeTemplatePath } from "../../src/wire/template-paths.js";
import { buildRawTarGz, buildZip } from "./archive-fixtures.js";

const limits: ArchiveLimits = DEFAULT_ARCHIVE_LIMITS;

function refuses(fn: () => unknown, pattern: RegExp): void {
  assert.throws(fn, (err: { status?: number; message?: string }) => {
    assert.equal(err.status, 422, err.message);
    assert.match(err.message ?? "", pattern);
    return true;
  });
}

describe("template paths", () => {
  it("accept plain relative paths and refuse everything that could leave the template", () => {
    assert.equal(normalizeTemplatePath("plugins/a.jar", "path"), "plugins/a.jar");
    assert.equal(normalizeTemplatePath("./x/y/", "e", { archive: true }), "x/y");
    assert.equal(normalizeTemplatePath("", "path", { allowRoot: true }), "");
    for (const bad of ["../x", "a/../../b", "/etc/passwd", "C:/x", "a\\b", "a\u0000b", "a//b", "./a", "a/./b", "x".repeat(241), `${"y".repeat(101)}/z`, ""]) {
      refuses(() => normalizeTemplatePath(bad, "path"), /path/);
    }
  });
});

describe("tar.gz", () => {
  it("round-trips files, directories, modes and long (PAX) paths", () => {
    const long = `${"d".repeat(90)}/${"e".repeat(90)}/${"f".repeat(50)}.txt`;
    const archive = writeTarGz([
      { path: "config", kind: "dir", mode: 0o755 },
      { path: "config/server.properties", kind: "file", mode: 0o644, data: Buffer.from("motd={{motd}}\n") },
      { path: "start.sh", kind: "file", mode: 0o755, data: Buffer.from("#!/bin/sh\n") },
      { path: long, kind: "file", mode: 0o644, data: Buffer.alloc(1000, 7) },
    ]);
    const entries = readTarGz(archive, limits);
    assert.deepEqual(entries.map((e) => [e.path, e.kind, e.mode & 0o777]), [
      ["config", "dir", 0o755],
      ["config/server.properties", "file", 0o644],
      ["start.sh", "file", 0o755],
      [long, "file", 0o644],
    ]);
    assert.equal(Buffer.from(entries[1].data).toString(), "motd={{motd}}\n");
    assert.equal(entries[3].data.byteLength, 1000);
  });

  it("refuses symlinks, hard links, devices, traversal, absolute paths and backslashes", () => {
    refuses(() => readTarGz(buildRawTarGz([{ name: "link", typeflag: "2", linkName: "/etc/passwd" }]), limits), /link/);
    refuses(() => readTarGz(buildRawTarGz([{ name: "hard", typeflag: "1", linkName: "x" }]), limits), /link/);
    refuses(() => readTarGz(buildRawTarGz([{ name: "dev", typeflag: "3" }]), limits), /regular file/);
    refuses(() => readTarGz(buildRawTarGz([{ name: "../escape.txt", data: "x" }]), limits), /\.\./);
    refuses(() => readTarGz(buildRawTarGz([{ name: "/abs.txt", data: "x" }]), limits), /absolute/);
    refuses(() => readTarGz(buildRawTarGz([{ name: "a\\b.txt", data: "x" }]), limits), /backslash/);
  });

  it("refuses a NUL or an over-long name in a PAX path record", () => {
    const pax = (value: string) => {
      const body = ` path=${value}\n`;
      let length = body.length + 2;
      while (`${length}${body}`.length !== length) length++;
      return `${length}${body}`;
    };
    refuses(() => readTarGz(buildRawTarGz([{ name: "PaxHeader", typeflag: "x", data: pax("a\u0000b") }, { name: "x", data: "1" }]), limits), /NUL|control/);
    refuses(() => readTarGz(buildRawTarGz([{ name: "PaxHeader", typeflag: "x", data: pax("n".repeat(300)) }, { name: "x", data: "1" }]), limits), /longer/);
  });

  it("bounds entry count and unpacked size (a gzip bomb stops while inflating)", () => {
    const many = buildRawTarGz(Array.from({ length: 11 }, (_, i) => ({ name: `f${i}`, data: "x" })));
    refuses(() => readTarGz(many, { entriesMax: 10, unpackedBytesMax: 1 << 20 }), /more than 10 entries/);
    const bomb = buildRawTarGz([{ name: "zeros", data: Buffer.alloc(8 << 20) }]);
    assert.ok(bomb.byteLength < 64 * 1024);
    refuses(() => readTarGz(bomb, { entriesMax: 10, unpackedBytesMax: 1 << 20 }), /more than/);
    refuses(() => readTarGz(gzipSync(Buffer.alloc(16 << 20)), { entriesMax: 10, unpackedBytesMax: 1 << 20 }), /more than/);
  });
});

describe("zip", () => {
  it("reads stored and deflated entries and directories", () => {
    const entries = readZip(
      buildZip([
        { name: "plugins/", unixMode: 0o040755 },
        { name: "plugins/a.txt", data: "alpha", method: 0 },
        { name: "plugins/b.txt", data: "beta".repeat(1000), method: 8 },
      ]),
      limits,
    );
    assert.deepEqual(entries.map((e) => [e.path, e.kind, e.data.byteLength]), [
      ["plugins", "dir", 0],
      ["plugins/a.txt", "file", 5],
      ["plugins/b.txt", "file", 4000],
    ]);
  });

  it("refuses symlinks, traversal, absolute paths, backslashes, NUL and over-long names", () => {
    refuses(() => readZip(buildZip([{ name: "link", data: "/etc/passwd", unixMode: 0o120777 }]), limits), /link/);
    refuses(() => readZip(buildZip([{ name: "../../x", data: "x" }]), limits), /\.\./);
    refuses(() => readZip(buildZip([{ name: "/x", data: "x" }]), limits), /absolute/);
    refuses(() => readZip(buildZip([{ name: "a\\..\\x", data: "x" }]), limits), /backslash/);
    refuses(() => readZip(buildZip([{ name: "a\u0000b", data: "x" }]), limits), /NUL/);
    refuses(() => readZip(buildZip([{ name: "q".repeat(300), data: "x" }]), limits), /longer/);
  });

  it("stops a zip bomb: entries inflating past their declared size or past the total bound", () => {
    const liar = buildZip([{ name: "small.txt", data: Buffer.alloc(10 << 20), declaredBytes: 100 }]);
    refuses(() => readZip(liar, limits), /beyond its declared size/);
    const big = buildZip(Array.from({ length: 3 }, (_, i) => ({ name: `z${i}`, data: Buffer.alloc(1 << 20) })));
    refuses(() => readZip(big, { entriesMax: 100, unpackedBytesMax: 2 << 20 }), /more than/);
    refuses(() => readZip(big, { entriesMax: 2, unpackedBytesMax: 64 << 20 }), /more than 2 entries/);
  });
});

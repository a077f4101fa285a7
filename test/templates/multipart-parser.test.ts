/**
 * The streaming multipart parser and the spool: bodies encoded by the platform's FormData parse to
 * the same parts however the bytes are split; framing errors, oversized headers and too many parts
 * are refused; file names reach the path rules unaltered; a spooled file is described exactly as
 * bytes in memory would be.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ContentHasher, FILE_CHUNK_BYTES, contentOfBytes } from "../../src/templates/file-content.js";
import { MultipartParser, multipartBoundary, type MultipartLimits } from "../../src/templates/multipart-parser.js";
import { spoolMultipart } from "../../src/templates/upload-spool.js";

interface ParsedPart {
  name: string;
  fileName?: string;
  body: string;
}

/** Parses `body` pushed in pieces of `pieceBytes`; returns the parts with their bodies as latin1. */
function parse(body: Uint8Array, boundary: string, pieceBytes: number, limits?: MultipartLimits): ParsedPart[] {
  const parser = new MultipartParser(boundary, limits);
  const parts: ParsedPart[] = [];
  const bodies: Buffer[][] = [];
  for (let at = 0; at < body.byteLength; at += pieceBytes) {
    for (const event of parser.push(body.subarray(at, at + pieceBytes))) {
      if (event.type === "part") {
        parts.push({ name: event.part.name, ...(event.part.fileName !== undefined ? { fileName: event.part.fileName } : {}), body: "" });
        bodies.push([]);
      } else if (event.type === "data") {
        bodies[bodies.length - 1].push(Buffer.from(event.bytes));
      }
    }
  }
  parser.end();
  return parts.map((p, i) => ({ ...p, body: Buffer.concat(bodies[i]).toString("latin1") }));
}

/** A FormData body as the platform encodes it. */
async function encoded(form: FormData): Promise<{ body: Uint8Array; boundary: string; contentType: string }> {
  const res = new Response(form);
  const contentType = res.headers.get("content-type")!;
  return { body: new Uint8Array(await res.arrayBuffer()), boundary: multipartBoundary(contentType), contentType };
}

function raw(text: string): Uint8Array {
  return Buffer.from(text.replace(/\n/g, "\r\n"), "latin1");
}

function refuses(fn: () => unknown, status: number, message?: RegExp): void {
  assert.throws(fn, (err: { status?: number; message?: string }) => {
    assert.equal(err.status, status, err.message);
    if (message) assert.match(err.message ?? "", message);
    return true;
  });
}

describe("multipart parser", () => {
  it("yields the same parts for every way the bytes are split", async () => {
    const binary = Buffer.alloc(3000);
    for (let i = 0; i < binary.length; i++) binary[i] = (i * 7) % 256;
    binary.write("\r\n--", 100, "latin1"); // a delimiter's beginning inside the content
    const form = new FormData();
    form.append("note", "hello");
    form.append("file", new Blob([binary]), "plugins/a.jar");
    form.append("file", new Blob([]), "empty.txt");
    form.append("file", new Blob(["ünïcode"]), "dír/ö.txt");
    const { body, boundary } = await encoded(form);
    const expected: ParsedPart[] = [
      { name: "note", body: "hello" },
      { name: "file", fileName: "plugins/a.jar", body: binary.toString("latin1") },
      { name: "file", fileName: "empty.txt", body: "" },
      { name: "file", fileName: "dír/ö.txt", body: Buffer.from("ünïcode").toString("latin1") },
    ];
    for (const pieceBytes of [1, 2, 3, 5, 7, 13, 64, 71, 72, 73, 1000, body.byteLength]) {
      assert.deepEqual(parse(body, boundary, pieceBytes), expected, `pieces of ${pieceBytes} bytes`);
    }
  });

  it("skips preamble and epilogue, accepts padding after a boundary and a part without headers", () => {
    const body = raw('preamble\n--b  \nContent-Disposition: form-data; name="a"\n\n1\n--b\n\nno headers\n--b--\nepilogue');
    assert.deepEqual(parse(body, "b", 4), [
      { name: "a", body: "1" },
      { name: "", body: "no headers" },
    ]);
  });

  it("hands file names on as sent, backslashes and dot segments included, and prefers filename*", () => {
    const body = raw(
      [
        "--b",
        'Content-Disposition: form-data; name="file"; filename="a\\b"',
        "",
        "x",
        "--b",
        'Content-Disposition: form-data; name="file"; filename="fallback"; filename*=UTF-8\'\'%C3%BC%20x.txt',
        "",
        "y",
        "--b",
        "content-disposition: form-data; name=file; filename=../../etc/passwd",
        "",
        "z",
        "--b--",
      ].join("\n"),
    );
    assert.deepEqual(
      parse(body, "b", 9).map((p) => p.fileName),
      ["a\\b", "ü x.txt", "../../etc/passwd"],
    );
  });

  it("refuses bad framing with 400, oversized headers with 400 and too many parts with 422", () => {
    refuses(() => parse(raw("--b\n\nx\n--b"), "b", 3), 400, /closing boundary/);
    refuses(() => parse(raw("--b\n\nx"), "b", 3), 400, /closing boundary/);
    refuses(() => parse(raw(""), "b", 3), 400);
    refuses(() => parse(raw("--b\n\nx\n--bX\n\n--b--"), "b", 3), 400, /after a boundary/);
    const longHeader = raw(`--b\nX-Pad: ${"p".repeat(200)}\n\nx\n--b--`);
    refuses(() => parse(longHeader, "b", 16, { partsMax: 10, headerBytesMax: 100 }), 400, /headers exceed 100 bytes/);
    assert.equal(parse(longHeader, "b", 16, { partsMax: 10, headerBytesMax: 300 }).length, 1);
    const threeParts = raw("--b\n\n1\n--b\n\n2\n--b\n\n3\n--b--");
    refuses(() => parse(threeParts, "b", 5, { partsMax: 2, headerBytesMax: 100 }), 422, /more than 2 parts/);
  });

  it("reads the boundary from the content type and refuses other types", () => {
    assert.equal(multipartBoundary("multipart/form-data; boundary=abc"), "abc");
    assert.equal(multipartBoundary('Multipart/Form-Data; charset=utf-8; boundary="a b"'), "a b");
    refuses(() => multipartBoundary("application/json"), 400, /multipart\/form-data/);
    refuses(() => multipartBoundary(undefined), 400);
    refuses(() => multipartBoundary("multipart/form-data"), 400, /no boundary/);
    refuses(() => multipartBoundary(`multipart/form-data; boundary=${"b".repeat(71)}`), 400);
  });
});

describe("file content", () => {
  it("describes streamed bytes exactly as the same bytes in memory", () => {
    for (const size of [0, 1, FILE_CHUNK_BYTES - 1, FILE_CHUNK_BYTES, FILE_CHUNK_BYTES + 1, 2 * FILE_CHUNK_BYTES + 5]) {
      const data = Buffer.alloc(size);
      for (let i = 0; i < size; i += 4096) data[i] = (i / 4096) % 251;
      const hasher = new ContentHasher();
      for (let at = 0; at < size; at += 65_537) hasher.update(data.subarray(at, at + 65_537));
      const streamed = hasher.finish("/spool/f");
      const inMemory = contentOfBytes(data);
      assert.equal(streamed.sha256, inMemory.sha256, `size ${size}`);
      assert.equal(streamed.size, size);
      assert.deepEqual(streamed.chunks, inMemory.chunks, `size ${size}`);
      assert.equal(streamed.chunks === undefined, size <= FILE_CHUNK_BYTES);
      assert.deepEqual([...streamed.sources.keys()], [...inMemory.sources.keys()]);
    }
  });
});

describe("upload spool", () => {
  it("writes the file parts of the field to disk and removes them on dispose", async () => {
    const directory = await mkdtemp(join(tmpdir(), "cloud-spool-test-"));
    try {
      const form = new FormData();
      form.append("other", new Blob(["dropped"]), "other.txt");
      form.append("file", "a plain field, not a file");
      form.append("file", new Blob(["PK\u0003\u0004rest"]), "a.zip");
      const { body, contentType } = await encoded(form);
      const spool = await spoolMultipart(new Blob([body]).stream(), contentType, { directory, field: "file" });
      assert.deepEqual(
        spool.files.map((f) => [f.fileName, f.content.size, Buffer.from(f.head).toString("latin1")]),
        [["a.zip", 8, "PK\u0003\u0004"]],
      );
      assert.equal(await readFile(spool.files[0].path, "latin1"), "PK\u0003\u0004rest");
      await spool.dispose();
      assert.deepEqual(await readdir(directory), []);

      await assert.rejects(spoolMultipart(new Blob([body.subarray(0, body.byteLength - 10)]).stream(), contentType, { directory, field: "file" }), {
        status: 400,
      });
      assert.deepEqual(await readdir(directory), [], "a refused body leaves nothing behind");
      const broken = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(body.subarray(0, body.byteLength - 10));
          controller.error(new Error("socket hang up"));
        },
      });
      await assert.rejects(spoolMultipart(broken, contentType, { directory, field: "file" }), {
        status: 400,
        message: "The request body ended before it was complete",
      });
      assert.deepEqual(await readdir(directory), [], "a body that breaks off leaves nothing behind");
    } finally {
      await rm(directory, { recursive: true, force: true });
    }
  });
});

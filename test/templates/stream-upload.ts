/**
 * A multipart upload client for the large-body tests: it generates the file as it sends it (never
 * holding more than one 64 KiB piece), hashes what it sent, honours back-pressure, and returns as
 * soon as the server answers, even when the server answers before the body is complete (413).
 */
import { createHash, randomBytes } from "node:crypto";
import { once } from "node:events";
import { request } from "node:http";
import { performance } from "node:perf_hooks";

/** Size of one generated piece of the file. */
const PIECE_BYTES = 64 * 1024;
/** Bytes the pieces are derived from; each piece also carries its index, so no two are equal. */
const PATTERN = randomBytes(PIECE_BYTES);

export interface StreamUploadOptions {
  url: string;
  token: string;
  fileName: string;
  sizeBytes: number;
  /** Content-Length to declare: the real length by default, `null` for chunked transfer. */
  declaredBytes?: number | null;
  field?: string;
}

export interface StreamUploadResult {
  status: number;
  json: any;
  /** sha256 of the file bytes that were sent (all of them when the upload completed). */
  sha256: string;
  sentFileBytes: number;
  /** From the request's start to the end of the answer. */
  elapsedMs: number;
}

/** The `index`-th piece of a generated file. */
function piece(index: number, bytes: number): Buffer {
  const out = Buffer.from(PATTERN.subarray(0, bytes));
  if (bytes >= 4) out.writeUInt32LE(index >>> 0, 0);
  return out;
}

/** Streams one generated file as a multipart body to `options.url` (POST). */
export async function streamUpload(options: StreamUploadOptions): Promise<StreamUploadResult> {
  const boundary = `----cloud-test-${randomBytes(8).toString("hex")}`;
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="${options.field ?? "file"}"; filename="${options.fileName}"\r\nContent-Type: application/octet-stream\r\n\r\n`,
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  const totalBytes = head.byteLength + options.sizeBytes + tail.byteLength;
  const declared = options.declaredBytes === undefined ? totalBytes : options.declaredBytes;
  const headers: Record<string, string> = { authorization: `Bearer ${options.token}`, "content-type": `multipart/form-data; boundary=${boundary}` };
  if (declared !== null) headers["content-length"] = String(declared);
  const startedMs = performance.now();
  const req = request(options.url, { method: "POST", headers });
  req.on("error", () => undefined); // writes after an early answer may fail; the answer is what counts
  let answered = false;
  let wake: (() => void) | null = null;
  const wakeUp = () => {
    wake?.();
    wake = null;
  };
  req.on("drain", wakeUp).on("close", wakeUp);
  const response = (async () => {
    const [res] = await once(req, "response");
    answered = true;
    wakeUp();
    const parts: Buffer[] = [];
    for await (const part of res) parts.push(part as Buffer);
    const text = Buffer.concat(parts).toString("utf8");
    return { status: res.statusCode as number, json: text ? JSON.parse(text) : undefined };
  })();
  response.catch(() => undefined); // awaited below; this only keeps an early failure from going unhandled
  const hash = createHash("sha256");
  let sentFileBytes = 0;
  const send = async (chunk: Buffer): Promise<void> => {
    if (answered || req.destroyed) return;
    if (!req.write(chunk)) await new Promise<void>((resolve) => (wake = resolve));
  };
  await send(head);
  for (let index = 0; sentFileBytes < options.sizeBytes && !answered && !req.destroyed; index++) {
    const chunk = piece(index, Math.min(PIECE_BYTES, options.sizeBytes - sentFileBytes));
    hash.update(chunk);
    sentFileBytes += chunk.byteLength;
    await send(chunk);
  }
  await send(tail);
  if (!answered) req.end();
  const { status, json } = await response;
  req.destroy();
  return { status, json, sha256: hash.digest("hex"), sentFileBytes, elapsedMs: performance.now() - startedMs };
}

/**
 * Streamed file transfers of cloudctl: a multipart/form-data upload built from local files as it is
 * sent (no file is read into memory), and a download written to `<file>.partial` and renamed into
 * place only when complete (an existing file is never replaced unless asked). A body may take as
 * long as it takes; the response headers must come within the client's request timeout.
 */
import { randomBytes } from "node:crypto";
import { createReadStream } from "node:fs";
import { link, open, rename, stat, unlink } from "node:fs/promises";
import { Readable } from "node:stream";
import { CliError, ExitCode } from "./exit-codes.js";
import { errorFromResponse, requestTimeoutMs, type HttpClient } from "./http-client.js";

/** One file part: the local file and the name it is sent under (a path below the target). */
export interface UploadPart {
  localPath: string;
  name: string;
  sizeBytes: number;
  /** The form field of this part, when not the upload's `field`. */
  field?: string;
}

function quoted(name: string): string {
  return name.replace(/["\\\r\n]/g, (c) => (c === '"' ? "%22" : c === "\\" ? "\\\\" : ""));
}

/** The multipart body of `parts` (field `field`) and its exact length. */
export function multipartBody(field: string, parts: readonly UploadPart[]): { body: Readable; contentType: string; lengthBytes: number } {
  const boundary = `----cloudctl${randomBytes(12).toString("hex")}`;
  const heads = parts.map((part) =>
    Buffer.from(
      `--${boundary}\r\ncontent-disposition: form-data; name="${part.field ?? field}"; filename="${quoted(part.name)}"\r\ncontent-type: application/octet-stream\r\n\r\n`,
    ),
  );
  const tail = Buffer.from(`--${boundary}--\r\n`);
  const lengthBytes = heads.reduce((sum, head, i) => sum + head.length + parts[i].sizeBytes + 2, 0) + tail.length;
  async function* chunks(): AsyncGenerator<Buffer> {
    for (let i = 0; i < parts.length; i++) {
      yield heads[i];
      for await (const chunk of createReadStream(parts[i].localPath)) yield chunk as Buffer;
      yield Buffer.from("\r\n");
    }
    yield tail;
  }
  return { body: Readable.from(chunks()), contentType: `multipart/form-data; boundary=${boundary}`, lengthBytes };
}

/** Sends `request` and returns the response once its headers came (bounded by the request timeout). */
async function fetchWithHeadersTimeout(client: HttpClient, url: string, init: RequestInit & { duplex?: "half" }): Promise<Response> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new Error(`no response within ${requestTimeoutMs} ms`)), requestTimeoutMs);
  try {
    return await fetch(url, { ...init, signal: controller.signal });
  } catch (error) {
    const err = error as { message?: string; cause?: { code?: string; message?: string } };
    throw new CliError(`cannot reach ${client.baseUrl}: ${err.cause?.code ?? err.cause?.message ?? err.message ?? String(error)}`, ExitCode.connection);
  } finally {
    clearTimeout(timer);
  }
}

/** POSTs `parts` as multipart/form-data to `path` with `query`; resolves with the raw answer. */
export async function uploadParts(
  client: HttpClient,
  path: string,
  query: Record<string, string | undefined>,
  field: string,
  parts: readonly UploadPart[],
): Promise<string> {
  const { body, contentType, lengthBytes } = multipartBody(field, parts);
  const url = client.url(path, query);
  const headers = { ...client.headers(true), "content-type": contentType, "content-length": String(lengthBytes) };
  client.logRequest("POST", url, headers);
  const controller = new AbortController();
  let response: Response;
  try {
    // Not bounded: the answer comes once the controller has received (and checked) the whole body.
    response = await fetch(url, {
      method: "POST",
      headers,
      body: Readable.toWeb(body) as ReadableStream<Uint8Array>,
      duplex: "half",
      signal: controller.signal,
    } as RequestInit);
  } catch (error) {
    const err = error as { message?: string; cause?: { code?: string; message?: string } };
    throw new CliError(`upload to ${client.baseUrl} failed: ${err.cause?.code ?? err.cause?.message ?? err.message ?? String(error)}`, ExitCode.connection);
  }
  const raw = await response.text();
  if (!response.ok) throw errorFromResponse(response.status, response.statusText, raw);
  return raw;
}

/**
 * Streams the body of `GET path?query` into `file` (or standard output for `-`): written to
 * `<file>.partial`, renamed when complete; refuses an existing `file` unless `force`.
 */
export async function downloadTo(
  client: HttpClient,
  path: string,
  query: Record<string, string | undefined>,
  file: string,
  force: boolean,
): Promise<{ sizeBytes: number; headers: Headers }> {
  if (file !== "-" && !force && (await exists(file))) throw new CliError(`${file} already exists: remove it, choose another --out, or pass --force`);
  const url = client.url(path, query);
  const headers = { ...client.headers(true), accept: "*/*" };
  client.logRequest("GET", url, headers);
  const response = await fetchWithHeadersTimeout(client, url, { headers });
  if (!response.ok || !response.body) throw errorFromResponse(response.status, response.statusText, await response.text());
  let sizeBytes = 0;
  if (file === "-") {
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      sizeBytes += chunk.byteLength;
      if (!process.stdout.write(chunk)) await new Promise((resolve) => process.stdout.once("drain", resolve));
    }
    return { sizeBytes, headers: response.headers };
  }
  const partial = `${file}.partial`;
  const handle = await open(partial, "w", 0o644);
  let complete = false;
  try {
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      for (let at = 0; at < chunk.byteLength;) at += (await handle.write(chunk, at)).bytesWritten;
      sizeBytes += chunk.byteLength;
    }
    complete = true;
  } catch (error) {
    throw new CliError(`download broke off after ${sizeBytes} bytes: ${(error as Error).message}`, ExitCode.connection);
  } finally {
    await handle.close();
    if (!complete) await unlink(partial).catch(() => undefined);
  }
  if (force) await rename(partial, file);
  else {
    try {
      await link(partial, file);
    } catch (error) {
      await unlink(partial).catch(() => undefined);
      if ((error as { code?: string }).code === "EEXIST") throw new CliError(`${file} already exists: remove it, choose another --out, or pass --force`);
      throw error;
    }
    await unlink(partial);
  }
  return { sizeBytes, headers: response.headers };
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

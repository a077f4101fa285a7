/**
 * Streaming template content in and out: the upload body limit, spooling multipart file parts to disk,
 * and attachment responses for downloads and exports.
 */
import { badRequest, validationError } from "../../../shared/errors.js";
import { isCleanlyDecodedName } from "../../../shared/unicode.js";
import { spoolMultipart, type SpooledFile } from "../../../templates/upload-spool.js";
import type { BodyLimitRoute } from "../../middleware/body-limit.js";
import type { AppContext } from "../../types.js";

/**
 * Largest request body of an upload or an import. The body streams to disk, so this bounds disk
 * use per request, not memory; the default body limit of every other route stays.
 */
export const TEMPLATE_UPLOAD_BYTES_MAX = 256 * 1024 * 1024;
export const UPLOAD_MIB = TEMPLATE_UPLOAD_BYTES_MAX / (1024 * 1024);
/** The routes that take {@link TEMPLATE_UPLOAD_BYTES_MAX}, for the body-limit middleware. */
export const TEMPLATE_BODY_LIMIT_ROUTES: readonly BodyLimitRoute[] = [
  { method: "POST", path: "/api/v1/templates/import", maxBytes: TEMPLATE_UPLOAD_BYTES_MAX },
  { method: "POST", path: "/api/v1/templates/:name/files/upload", maxBytes: TEMPLATE_UPLOAD_BYTES_MAX },
];

/**
 * Spools the file parts named `field` of the request, runs `use` on them, then removes them: 400 for
 * a body that is not multipart/form-data or a file name that is not UTF-8 (or holds U+FFFD), 422
 * when no file part came.
 */
export async function withSpooledFiles<T>(c: AppContext, field: string, spoolDirectory: string, use: (files: SpooledFile[]) => Promise<T>): Promise<T> {
  const spool = await spoolMultipart(c.req.raw.body, c.req.header("content-type"), { directory: spoolDirectory, field });
  try {
    if (spool.files.length === 0) throw validationError(`${field}: a file part is required`);
    // Part headers are decoded leniently, so bytes that were not UTF-8 arrive as U+FFFD.
    if (spool.files.some((file) => !isCleanlyDecodedName(file.fileName))) throw badRequest(`${field}: a file name is not valid UTF-8`);
    return await use(spool.files);
  } finally {
    await spool.dispose();
  }
}

/** A download response; `sizeBytes` null when the length is known only once it is sent (chunked). */
export function attachment(
  body: ReadableStream<Uint8Array>,
  sizeBytes: number | null,
  fileName: string,
  contentType: string,
  extra: Record<string, string> = {},
): Response {
  const ascii = fileName.replace(/[^A-Za-z0-9._-]/g, "_");
  return new Response(body, {
    status: 200,
    headers: {
      "content-type": contentType,
      ...(sizeBytes === null ? {} : { "content-length": String(sizeBytes) }),
      "content-disposition": `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(fileName)}`,
      ...extra,
    },
  });
}

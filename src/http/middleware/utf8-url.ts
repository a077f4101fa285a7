/**
 * Refuses request URLs whose percent-escapes do not decode as UTF-8 (`%FF`, a truncated sequence,
 * an encoded surrogate) with 400 BAD_REQUEST, before any route reads a path parameter or a query
 * value. hono leaves such escapes undecoded, so without this a route would see the literal text
 * `%FF` as a name; with a loose decoder it would see U+FFFD instead. Either way the name the client
 * meant is lost, so the request is refused rather than guessed at.
 */
import type { MiddlewareHandler } from "hono";
import { badRequest } from "../../shared/errors.js";
import type { AppEnv } from "../types.js";

const escapeRun = /(?:%[0-9A-Fa-f]{2})+/g;
const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/** True when some run of `%XX` escapes in `url` is not UTF-8. A `%` without two hex digits is left alone. */
export function hasNonUtf8Escapes(url: string): boolean {
  if (!url.includes("%")) return false;
  for (const [run] of url.matchAll(escapeRun)) {
    const bytes = new Uint8Array(run.length / 3);
    for (let i = 0; i < bytes.length; i++) bytes[i] = Number.parseInt(run.slice(i * 3 + 1, i * 3 + 3), 16);
    try {
      strictUtf8.decode(bytes);
    } catch {
      return true;
    }
  }
  return false;
}

/** 400 BAD_REQUEST for a path or query string with percent-escapes that are not UTF-8. */
export const utf8Url = (): MiddlewareHandler<AppEnv> =>
  async function utf8Url(c, next) {
    if (hasNonUtf8Escapes(c.req.url)) throw badRequest("Request URL holds percent-escapes that are not UTF-8");
    await next();
  };

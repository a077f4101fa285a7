/**
 * Reading a request body as JSON without trusting it: the bytes must be UTF-8 (decoded strictly, so
 * nothing turns into U+FFFD on the way in), the nesting must stay within {@link JSON_BODY_DEPTH_MAX}
 * before anything parses or walks it, and every string and key must be well-formed Unicode (a JSON
 * escape such as `"\ud800"` is valid JSON but no UTF-8 encoding of it exists). Each refusal is a 400
 * BAD_REQUEST, like malformed JSON: the body is not a readable request at all, whatever the route.
 */
import { badRequest } from "../shared/errors.js";
import { isWellFormedText } from "../shared/unicode.js";

/**
 * Deepest nesting of arrays and objects accepted in a request body. No route's schema goes deeper
 * than a handful of levels; the bound is there because schema validation recurses once per level
 * (a 10 KB body of 5,000 nested arrays used to exhaust the stack in typebox's value clone).
 */
export const JSON_BODY_DEPTH_MAX = 64;

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** `bytes` as UTF-8 text, or a 400 when they are not UTF-8. A leading byte order mark is dropped. */
export function decodeUtf8Body(bytes: Uint8Array): string {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    throw badRequest("Request body is not valid UTF-8");
  }
}

/**
 * The deepest nesting of `[` and `{` in `text`, counted outside string literals, stopping as soon as
 * it passes `limit`. Linear and iterative: it runs before the parser, on text that may not be JSON.
 * String literals are skipped with `indexOf`, so long strings cost little.
 */
export function jsonNestingDepth(text: string, limit: number): number {
  let depth = 0;
  let deepest = 0;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (ch === QUOTE) {
      const end = closingQuote(text, i);
      if (end < 0) return deepest;
      i = end;
    } else if (ch === 0x5b /* [ */ || ch === 0x7b /* { */) {
      depth++;
      if (depth > deepest) {
        deepest = depth;
        if (deepest > limit) return deepest;
      }
    } else if (ch === 0x5d /* ] */ || ch === 0x7d /* } */) {
      depth--;
    }
  }
  return deepest;
}

/** Index of the quote that closes the string opened at `open`, or -1 when it is never closed. */
function closingQuote(text: string, open: number): number {
  let from = open + 1;
  for (;;) {
    const at = text.indexOf('"', from);
    if (at < 0) return -1;
    let backslashes = 0;
    while (text.charCodeAt(at - 1 - backslashes) === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return at;
    from = at + 1;
  }
}

/**
 * A `\uD800`-`\uDFFF` escape somewhere in the text. Only such escapes can put a lone surrogate into
 * a parsed value (strict decoding never makes one), so without a match the walk below is skipped.
 */
const surrogateEscape = /\\u[dD][89a-fA-F]/;

/** True when every string and object key in `value` is well-formed Unicode (no lone surrogates). */
function wellFormed(value: unknown): boolean {
  if (typeof value === "string") return isWellFormedText(value);
  if (Array.isArray(value)) return value.every(wellFormed);
  if (value !== null && typeof value === "object") {
    for (const [key, inner] of Object.entries(value)) {
      if (!isWellFormedText(key) || !wellFormed(inner)) return false;
    }
  }
  return true;
}

/**
 * Parses a request body: an empty (or blank) body is `{}`; otherwise it must be UTF-8, nest at most
 * {@link JSON_BODY_DEPTH_MAX} levels, be JSON, and hold only well-formed strings. Anything else is a
 * 400 BAD_REQUEST naming which of these failed.
 */
export function parseJsonBody(bytes: Uint8Array): unknown {
  const text = decodeUtf8Body(bytes);
  if (text.trim() === "") return {};
  if (jsonNestingDepth(text, JSON_BODY_DEPTH_MAX) > JSON_BODY_DEPTH_MAX) {
    throw badRequest(`Request body nests deeper than ${JSON_BODY_DEPTH_MAX} levels`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw badRequest("Request body is not valid JSON");
  }
  // The depth check above bounds this recursion.
  if (surrogateEscape.test(text) && !wellFormed(value)) throw badRequest("Request body holds a string that is not valid Unicode (a lone surrogate)");
  return value;
}

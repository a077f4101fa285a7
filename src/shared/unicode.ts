/**
 * Unicode checks for names and paths that arrive from outside. JavaScript strings are UTF-16 and may
 * hold lone surrogates (from a JSON escape such as `"\ud800"`), which have no UTF-8 encoding: writing
 * one out silently turns it into U+FFFD. A U+FFFD that is already there is usually what a loose
 * decoder made of bytes that were not UTF-8.
 */

const loneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** True when `text` has no lone surrogate, i.e. it can be encoded as UTF-8 without loss. */
export function isWellFormedText(text: string): boolean {
  return !loneSurrogate.test(text);
}

/** The replacement character a loose UTF-8 decoder puts in place of bytes it could not decode. */
export const REPLACEMENT_CHARACTER = "\uFFFD";

/** True when `name` is well-formed and holds no U+FFFD: a name that was decoded without loss. */
export function isCleanlyDecodedName(name: string): boolean {
  return isWellFormedText(name) && !name.includes(REPLACEMENT_CHARACTER);
}

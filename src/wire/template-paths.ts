/**
 * Template-relative paths. Every path that reaches a template (route parameters, archive entries,
 * rename targets) passes {@link normalizeTemplatePath}, which refuses anything that could leave the
 * template: `..` and `.` segments, absolute and drive-letter paths, backslashes, NUL and other
 * control characters, text that is not valid UTF-8, and over-long names. A refused path is a 422 and
 * nothing is written.
 *
 * "Not valid UTF-8" here means a lone surrogate or U+FFFD: a name decoded loosely from bytes that
 * were not UTF-8 (an archive entry, a multipart header) carries U+FFFD, and a lone surrogate cannot
 * be written out without turning into one. A real file name has no use for either.
 */
import { validationError } from "../shared/errors.js";
import { isCleanlyDecodedName } from "../shared/unicode.js";

/** Longest template-relative path, in characters (fits a ustar header or one PAX record). */
export const TEMPLATE_PATH_LENGTH_MAX = 240;
/** Longest single path segment, in characters (the usual filesystem limit is 255 bytes). */
export const TEMPLATE_SEGMENT_LENGTH_MAX = 100;
/** Deepest directory nesting, in segments. */
export const TEMPLATE_PATH_DEPTH_MAX = 32;

/**
 * The canonical form of a template path (`a/b/c.txt`, no leading or trailing slash), or a 422
 * naming `field` when the path is not confined to the template. The empty string is the root and is
 * accepted only with `allowRoot`. Archive readers pass `archive` to also accept a leading `./` and a
 * trailing `/`, as tar and zip tools write them.
 */
export function normalizeTemplatePath(raw: string, field: string, opts: { allowRoot?: boolean; archive?: boolean } = {}): string {
  const refuse = (reason: string) => validationError(`${field}: ${reason}`, "INVALID_PATH");
  if (typeof raw !== "string") throw refuse("must be a string");
  if (raw.length > TEMPLATE_PATH_LENGTH_MAX) throw refuse(`longer than ${TEMPLATE_PATH_LENGTH_MAX} characters`);
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(raw)) throw refuse("contains a control character");
  if (raw.includes("\\")) throw refuse("contains a backslash");
  if (!isCleanlyDecodedName(raw)) throw refuse("is not valid UTF-8 (holds U+FFFD or a lone surrogate)");
  if (/^[A-Za-z]:/.test(raw)) throw refuse("is an absolute path");
  let path = raw;
  if (opts.archive) {
    while (path.startsWith("./")) path = path.slice(2);
    if (path.endsWith("/")) path = path.slice(0, -1);
  } else if (path.endsWith("/") && path.length > 1) {
    path = path.slice(0, -1);
  }
  if (path.startsWith("/")) throw refuse("is an absolute path");
  if (path === "" || path === ".") {
    if (opts.allowRoot) return "";
    throw refuse("must name a file or directory");
  }
  const segments = path.split("/");
  if (segments.length > TEMPLATE_PATH_DEPTH_MAX) throw refuse(`deeper than ${TEMPLATE_PATH_DEPTH_MAX} levels`);
  for (const segment of segments) {
    if (segment === "") throw refuse("contains an empty segment");
    if (segment === "." || segment === "..") throw refuse("contains a . or .. segment");
    if (segment.length > TEMPLATE_SEGMENT_LENGTH_MAX) throw refuse(`has a segment longer than ${TEMPLATE_SEGMENT_LENGTH_MAX} characters`);
  }
  return path;
}

/** The parent directory of a normalized path (`""` for top-level entries). */
export function parentOf(path: string): string {
  const slash = path.lastIndexOf("/");
  return slash < 0 ? "" : path.slice(0, slash);
}

/** Every ancestor directory of a normalized path, outermost first (`a/b/c` → `a`, `a/b`). */
export function ancestorsOf(path: string): string[] {
  const out: string[] = [];
  let at = path.indexOf("/");
  while (at >= 0) {
    out.push(path.slice(0, at));
    at = path.indexOf("/", at + 1);
  }
  return out;
}

/** The last segment of a normalized path. */
export function baseName(path: string): string {
  return path.slice(path.lastIndexOf("/") + 1);
}

/** Joins a normalized directory (possibly the root) and a relative normalized path. */
export function joinTemplatePath(dir: string, rest: string): string {
  return dir === "" ? rest : rest === "" ? dir : `${dir}/${rest}`;
}

/** True when `path` is `dir` itself or lies beneath it (`dir` `""` contains everything). */
export function isWithin(path: string, dir: string): boolean {
  return dir === "" || path === dir || path.startsWith(`${dir}/`);
}

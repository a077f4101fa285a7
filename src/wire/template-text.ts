/**
 * Text handling shared by the controller and the daemon: deciding whether bytes are text, finding
 * `{{var}}` placeholders and substituting them.
 */

/** Placeholder syntax: `{{name}}` with optional inner spaces; names use letters, digits, `_ . -`. */
export const PLACEHOLDER_PATTERN = /\{\{\s*([A-Za-z0-9_.-]{1,64})\s*\}\}/g;
/**
 * Placeholders the daemon fills for every instance, whatever the templates define (they win over a
 * template variable of the same name): the instance id, its group, its port, its memory in MB and
 * its platform.
 */
export const INSTANCE_PLACEHOLDERS = ["instanceId", "group", "port", "memoryMb", "platform"] as const;
/** Bytes inspected for NUL when deciding whether a file is text. */
const TEXT_SNIFF_BYTES = 8192;
const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/** Decodes `data` as UTF-8 text, or returns null for binary data (a NUL early on, or invalid UTF-8). */
export function decodeText(data: Uint8Array): string | null {
  if (data.subarray(0, TEXT_SNIFF_BYTES).includes(0)) return null;
  try {
    return strictUtf8.decode(data);
  } catch {
    // Invalid UTF-8 is binary data, which is copied as it is: the answer, not an error.
    return null;
  }
}

/** The distinct placeholder names in `text`, in order of first appearance. */
export function placeholdersIn(text: string): string[] {
  const names = new Set<string>();
  for (const match of text.matchAll(PLACEHOLDER_PATTERN)) names.add(match[1]);
  return [...names];
}

/** Replaces every placeholder whose name is in `variables`; unknown placeholders stay as they are. */
export function substituteVariables(text: string, variables: Readonly<Record<string, string>>): string {
  return text.replace(PLACEHOLDER_PATTERN, (whole, name: string) => (Object.hasOwn(variables, name) ? variables[name] : whole));
}

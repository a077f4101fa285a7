/**
 * Server-side redaction of support data (spec document 2, "Diagnostics and sharing"): what leaves
 * the controller through the diagnostics route or a share never carries a signing secret, a
 * password or credentials inside a URI. Three layers, applied together:
 *
 * 1. by key: a value under a key that names a secret (password, secret, token, credential, private
 *    key, api key, seed) is replaced whole, whatever it is;
 * 2. by shape: credentials in URIs (`scheme://user:pass@host` keeps only the scheme and host),
 *    `Bearer` tokens, PEM private-key blocks, and the first-start line that prints a generated
 *    admin password;
 * 3. by value: every secret the controller knows (the configured admin password, the JWT signing
 *    secret, the cluster seed, the CA key) is replaced wherever it occurs in the text, so a secret
 *    that reached a log message is caught too.
 */

/** What a removed value is replaced with. */
export const REDACTED = "[REDACTED]";

/** Keys whose values are secrets, matched case-insensitively on the key's own name. */
const SECRET_KEY = /(pass(word|wd|phrase)?|secret|token|credential|private[-_]?key|api[-_]?key|seed|authorization|cookie)$/i;
/** Keys that end like a secret's but hold none (fencing tokens are Raft indexes and counters). */
const NOT_SECRET_KEY = /^(fencing|lease)[-_]?token$/i;
/** `scheme://userinfo@`: the user information part of a URI, with or without a password. */
const URI_USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#@"'<>]+@/gi;
const BEARER = /\b(Bearer\s+)[A-Za-z0-9._~+/=-]+/g;
const PEM_PRIVATE_KEY = /-----BEGIN ([A-Z ]*)PRIVATE KEY-----[\s\S]*?-----END \1PRIVATE KEY-----/g;
const GENERATED_PASSWORD = /(generated password:\s*)\S+/gi;
/** Known secret values shorter than this are not searched for (they would match ordinary text). */
const KNOWN_SECRET_CHARS_MIN = 6;

/** Whether a key's value is removed whole. */
export function isSecretKey(key: string): boolean {
  return SECRET_KEY.test(key) && !NOT_SECRET_KEY.test(key);
}

/** Redacts text: shapes first, then every known secret value. */
export function redactText(text: string, knownSecrets: readonly string[] = []): string {
  let out = text
    .replace(PEM_PRIVATE_KEY, REDACTED)
    .replace(URI_USERINFO, `$1${REDACTED}@`)
    .replace(BEARER, `$1${REDACTED}`)
    .replace(GENERATED_PASSWORD, `$1${REDACTED}`);
  for (const secret of knownSecrets) {
    if (secret.length >= KNOWN_SECRET_CHARS_MIN) out = out.split(secret).join(REDACTED);
  }
  return out;
}

/** A deep copy of `value` with secret keys removed and every string redacted as {@link redactText} does. */
export function redactValue<T>(value: T, knownSecrets: readonly string[] = []): T {
  const visit = (node: unknown, depth: number): unknown => {
    if (typeof node === "string") return redactText(node, knownSecrets);
    if (node === null || typeof node !== "object") return node;
    // Support data is shallow; a deeper structure is cut instead of walked without end.
    if (depth > 32) return REDACTED;
    if (Array.isArray(node)) return node.map((item) => visit(item, depth + 1));
    const out: Record<string, unknown> = {};
    for (const [key, child] of Object.entries(node as Record<string, unknown>)) {
      out[key] = isSecretKey(key) && child !== null && child !== "" && typeof child !== "boolean" ? REDACTED : visit(child, depth + 1);
    }
    return out;
  };
  return visit(value, 0) as T;
}

/**
 * A client of the PrivateBin JSON API (format version 2), the paste service shares are uploaded
 * to. PrivateBin pastes are encrypted by the client: the server stores ciphertext only and the key
 * travels in the link's fragment (`#<base58 key>`), which browsers never send to the server.
 *
 * Upload: `POST <service>` with `X-Requested-With: JSONHttpRequest` and
 * `{"v":2,"adata":[[iv,salt,iterations,keyBits,tagBits,"aes","gcm","zlib"],"plaintext",discussion,burn],"ct":…,"meta":{"expire":…}}`;
 * the answer is `{"status":0,"id":…,"url":…,"deletetoken":…}` or `{"status":1,"message":…}`.
 * Encryption: AES-256-GCM under a key derived with PBKDF2-HMAC-SHA256 from 32 random bytes (and
 * the paste password appended, for a password-protected paste), the JSON of `adata` as additional
 * data, the plaintext `{"paste":text}` compressed with raw deflate. Deletion: `POST <service>`
 * with the same header and `{"pasteid":…,"deletetoken":…}`, answered `{"status":0,"id":…}` or
 * `{"status":1,"message":…}` (a browser opens the equivalent `GET
 * <service>?pasteid=<id>&deletetoken=<token>`).
 *
 * The key derivation and the cipher run on Node's thread pool (async pbkdf2, async deflate); only
 * the final GCM pass over the compressed text runs on the event loop.
 */
import { createCipheriv, pbkdf2, randomBytes } from "node:crypto";
import { promisify } from "node:util";
import { deflateRaw } from "node:zlib";

const pbkdf2Async = promisify(pbkdf2);
const deflateRawAsync = promisify(deflateRaw);

/** PBKDF2 iterations PrivateBin's own client uses. */
export const PRIVATEBIN_KDF_ITERATIONS = 100_000;
const KEY_BYTES = 32;
const IV_BYTES = 16;
const SALT_BYTES = 8;
const TAG_BITS = 128;

/** PrivateBin's expiry names. */
export type PrivateBinExpiry = "5min" | "10min" | "1hour" | "1day" | "1week" | "1month" | "1year" | "never";

export interface PasteRequest {
  text: string;
  expire: PrivateBinExpiry;
  burnAfterReading: boolean;
  /** Set: the paste opens only with this password besides the link. */
  password?: string;
}

export interface PasteCreated {
  /** The link that opens the paste (with the key in its fragment). */
  url: string;
  id: string;
  /** Opening this deletes the paste (empty when the service gave no delete token). */
  deleteUrl: string;
  /** The paste's delete token; empty when the service gave none. A secret: whoever holds it can delete the paste. */
  deleteToken: string;
}

/** The paste service answered an error, could not be reached, or answered something else. */
export class PasteUpstreamError extends Error {
  constructor(
    /** The HTTP status, or `network` when no answer came. */
    readonly status: string,
    message: string,
  ) {
    super(message);
    this.name = "PasteUpstreamError";
  }
}

const BASE58_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

/** Base58 (the Bitcoin alphabet PrivateBin uses for keys in links). */
export function base58Encode(bytes: Uint8Array): string {
  const digits: number[] = [];
  for (const byte of bytes) {
    let carry = byte;
    for (let i = 0; i < digits.length; i++) {
      carry += digits[i]! << 8;
      digits[i] = carry % 58;
      carry = Math.floor(carry / 58);
    }
    while (carry > 0) {
      digits.push(carry % 58);
      carry = Math.floor(carry / 58);
    }
  }
  let out = "";
  for (const byte of bytes) {
    if (byte !== 0) break;
    out += BASE58_ALPHABET[0];
  }
  for (let i = digits.length - 1; i >= 0; i--) out += BASE58_ALPHABET[digits[i]!];
  return out;
}

/** The ciphertext and authenticated data of a paste (exported for the tests' decrypting server). */
export async function encryptPaste(text: string, burnAfterReading: boolean, password = ""): Promise<{ adata: unknown[]; ct: string; key: Buffer }> {
  const key = randomBytes(KEY_BYTES);
  const iv = randomBytes(IV_BYTES);
  const salt = randomBytes(SALT_BYTES);
  const spec = [iv.toString("base64"), salt.toString("base64"), PRIVATEBIN_KDF_ITERATIONS, KEY_BYTES * 8, TAG_BITS, "aes", "gcm", "zlib"];
  const adata = [spec, "plaintext", 0, burnAfterReading ? 1 : 0];
  const derived = await pbkdf2Async(Buffer.concat([key, Buffer.from(password, "utf8")]), salt, PRIVATEBIN_KDF_ITERATIONS, KEY_BYTES, "sha256");
  const compressed = await deflateRawAsync(Buffer.from(JSON.stringify({ paste: text }), "utf8"));
  const cipher = createCipheriv("aes-256-gcm", derived, iv, { authTagLength: TAG_BITS / 8 });
  cipher.setAAD(Buffer.from(JSON.stringify(adata), "utf8"));
  const ct = Buffer.concat([cipher.update(compressed), cipher.final(), cipher.getAuthTag()]).toString("base64");
  return { adata, ct, key };
}

/** Uploads to the PrivateBin instance at `serviceUrl`; rejects with {@link PasteUpstreamError}. */
export async function createPrivateBinPaste(serviceUrl: string, request: PasteRequest, timeoutMs: number): Promise<PasteCreated> {
  const { adata, ct, key } = await encryptPaste(request.text, request.burnAfterReading, request.password);
  let response: Response;
  try {
    response = await fetch(serviceUrl, {
      method: "POST",
      headers: { "content-type": "application/json", "x-requested-with": "JSONHttpRequest", accept: "application/json" },
      body: JSON.stringify({ v: 2, adata, ct, meta: { expire: request.expire } }),
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (err) {
    throw new PasteUpstreamError("network", `The paste service cannot be reached: ${(err as Error).message}`);
  }
  const body = await response.text().catch(() => "");
  if (!response.ok) throw new PasteUpstreamError(String(response.status), `The paste service answered HTTP ${response.status}`);
  let answer: { status?: unknown; id?: unknown; deletetoken?: unknown; message?: unknown };
  try {
    answer = JSON.parse(body) as typeof answer;
  } catch {
    throw new PasteUpstreamError(String(response.status), "The paste service answered something other than JSON");
  }
  if (answer.status !== 0 || typeof answer.id !== "string" || !/^[A-Za-z0-9]{1,64}$/.test(answer.id)) {
    const message = typeof answer.message === "string" ? answer.message.slice(0, 200) : "no paste id";
    throw new PasteUpstreamError(String(response.status), `The paste service refused the paste: ${message}`);
  }
  const base = new URL(serviceUrl);
  base.search = "";
  base.hash = "";
  const url = `${base.toString()}?${answer.id}#${base58Encode(key)}`;
  const deleteToken = typeof answer.deletetoken === "string" ? answer.deletetoken : "";
  const deleteUrl = deleteToken === "" ? "" : `${base.toString()}?pasteid=${encodeURIComponent(answer.id)}&deletetoken=${encodeURIComponent(deleteToken)}`;
  return { url, id: answer.id, deleteUrl, deleteToken };
}

/** What a delete asks of the service at `serviceUrl`. */
export interface PasteDeletion {
  pasteId: string;
  deleteToken: string;
}

/**
 * Asks the PrivateBin instance at `serviceUrl` to delete a paste with its delete token; rejects
 * with {@link PasteUpstreamError} when it cannot be reached, answers an HTTP error, or refuses
 * (`status` 1: a wrong token, or a paste that is already gone).
 */
export async function deletePrivateBinPaste(serviceUrl: string, deletion: PasteDeletion, timeoutMs: number): Promise<void> {
  let response: Response;
  try {
    response = await fetch(serviceUrl, {
      method: "POST",
      headers: { "content-type": "application/json", "x-requested-with": "JSONHttpRequest", accept: "application/json" },
      body: JSON.stringify({ pasteid: deletion.pasteId, deletetoken: deletion.deleteToken }),
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (err) {
    throw new PasteUpstreamError("network", `The paste service cannot be reached: ${(err as Error).message}`);
  }
  const body = await response.text().catch(() => "");
  if (!response.ok) throw new PasteUpstreamError(String(response.status), `The paste service answered HTTP ${response.status}`);
  let answer: { status?: unknown; message?: unknown };
  try {
    answer = JSON.parse(body) as typeof answer;
  } catch {
    throw new PasteUpstreamError(String(response.status), "The paste service answered something other than JSON");
  }
  if (answer.status !== 0) {
    const message = typeof answer.message === "string" ? answer.message.slice(0, 200) : "no reason given";
    throw new PasteUpstreamError(String(response.status), `The paste service did not delete the paste: ${message}`);
  }
}

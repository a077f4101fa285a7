/**
 * Password hashing with scrypt (node:crypto). Parameters: N = 2^15 (cost), r = 8 (block size),
 * p = 1 (parallelism), 16-byte random salt, 64-byte key: about 32 MiB of memory and tens of
 * milliseconds per hash, OWASP's recommended floor for scrypt. The parameters are stored in the hash
 * (`scrypt$N$r$p$salt$key`, base64url) so they can be raised later without invalidating old hashes.
 */
import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from "node:crypto";

export interface ScryptParams {
  cost: number;
  blockSize: number;
  parallelization: number;
}

export const SCRYPT_DEFAULTS: ScryptParams = { cost: 2 ** 15, blockSize: 8, parallelization: 1 };
const SALT_BYTES = 16;
const KEY_BYTES = 64;
/** Hashes with N or r above this are refused when verifying (a stored hash must not exhaust memory). */
const SCRYPT_COST_MAX = 2 ** 20;
const SCRYPT_BLOCK_SIZE_MAX = 32;

function derive(password: string, salt: Buffer, params: ScryptParams): Promise<Buffer> {
  const options: ScryptOptions = {
    N: params.cost,
    r: params.blockSize,
    p: params.parallelization,
    maxmem: 256 * params.cost * params.blockSize + 1024 * 1024,
  };
  return new Promise((resolve, reject) => {
    scrypt(password.normalize("NFC"), salt, KEY_BYTES, options, (err, key) => (err ? reject(err) : resolve(key)));
  });
}

/** Hashes `password` with a fresh random salt. */
export async function hashPassword(password: string, params: ScryptParams = SCRYPT_DEFAULTS): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const key = await derive(password, salt, params);
  return ["scrypt", params.cost, params.blockSize, params.parallelization, salt.toString("base64url"), key.toString("base64url")].join("$");
}

/** True when `password` matches `stored`; false for any malformed hash. Compares in constant time. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parts = stored.split("$");
  if (parts.length !== 6 || parts[0] !== "scrypt") return false;
  const [cost, blockSize, parallelization] = parts.slice(1, 4).map(Number);
  if (![cost, blockSize, parallelization].every(Number.isSafeInteger)) return false;
  if (cost < 2 || cost > SCRYPT_COST_MAX || blockSize < 1 || blockSize > SCRYPT_BLOCK_SIZE_MAX || parallelization !== 1) return false;
  const salt = Buffer.from(parts[4], "base64url");
  const expected = Buffer.from(parts[5], "base64url");
  if (expected.length !== KEY_BYTES) return false;
  const actual = await derive(password, salt, { cost, blockSize, parallelization });
  return timingSafeEqual(actual, expected);
}

/**
 * Cluster join tokens: `ccj_<claims>.<signature>`, the claims base64url JSON, the signature an
 * HMAC-SHA256 of `ccj_<claims>` with the cluster's seed secret. The claims name the cluster, the
 * gRPC join addresses of existing members, the expiry, the seed generation, the SHA-256
 * fingerprint of the cluster CA (so the joining controller can check whom it joined) and a random
 * part that appears nowhere else, so the stored hash cannot be turned back into the value.
 *
 * A joining controller reads the claims without the seed ({@link readJoinTokenClaims}); a member
 * checks the signature ({@link verifyJoinToken}); the Raft state decides single use and expiry.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { Type, type Static } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";

export const JOIN_TOKEN_PREFIX = "ccj_";
/** Longest token accepted anywhere (64 join addresses fit well below this). */
export const joinTokenCharsMax = 16 * 1024;

export const JoinTokenClaimsSchema = Type.Object({
  v: Type.Literal(1),
  jti: Type.String({ minLength: 1, maxLength: 64 }),
  cid: Type.String({ minLength: 1, maxLength: 128 }),
  addrs: Type.Array(Type.String({ maxLength: 300 }), { minItems: 1, maxItems: 64 }),
  exp: Type.Integer({ minimum: 0 }),
  sg: Type.Integer({ minimum: 1 }),
  caf: Type.String({ maxLength: 200 }),
  k: Type.String({ maxLength: 64 }),
});
export type JoinTokenClaims = Static<typeof JoinTokenClaimsSchema>;

/** A new token id. */
export function newJoinTokenId(): string {
  return randomBytes(12).toString("base64url");
}

/** Signs `claims` (the random part is added here) with the seed secret (base64url). */
export function signJoinToken(claims: Omit<JoinTokenClaims, "v" | "k">, seedSecret: string): string {
  const full: JoinTokenClaims = { v: 1, ...claims, k: randomBytes(16).toString("base64url") };
  const body = JOIN_TOKEN_PREFIX + Buffer.from(JSON.stringify(full)).toString("base64url");
  return `${body}.${signature(body, seedSecret)}`;
}

/** The claims of a well-formed token, without checking the signature; null otherwise. */
export function readJoinTokenClaims(token: string): JoinTokenClaims | null {
  const parts = splitToken(token);
  if (!parts) return null;
  try {
    const claims: unknown = JSON.parse(Buffer.from(parts.body.slice(JOIN_TOKEN_PREFIX.length), "base64url").toString("utf8"));
    return Value.Check(JoinTokenClaimsSchema, claims) ? claims : null;
  } catch {
    // Undecodable claims make an invalid token; callers refuse it with JOIN_TOKEN_INVALID.
    return null;
  }
}

/** The claims when the token is well formed and signed with `seedSecret`; null otherwise. */
export function verifyJoinToken(token: string, seedSecret: string): JoinTokenClaims | null {
  const parts = splitToken(token);
  if (!parts) return null;
  const expected = Buffer.from(signature(parts.body, seedSecret));
  const given = Buffer.from(parts.signature);
  if (expected.length !== given.length || !timingSafeEqual(expected, given)) return null;
  return readJoinTokenClaims(token);
}

/** The sha256 (hex) of a token value: what the cluster state keeps. */
export function hashJoinToken(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

/** A new seed secret (base64url of 32 random bytes). */
export function newSeedSecret(): string {
  return randomBytes(32).toString("base64url");
}

function signature(body: string, seedSecret: string): string {
  return createHmac("sha256", Buffer.from(seedSecret, "base64url")).update(body).digest("base64url");
}

function splitToken(token: string): { body: string; signature: string } | null {
  if (token.length > joinTokenCharsMax || !token.startsWith(JOIN_TOKEN_PREFIX)) return null;
  const dot = token.lastIndexOf(".");
  if (dot <= JOIN_TOKEN_PREFIX.length) return null;
  return { body: token.slice(0, dot), signature: token.slice(dot + 1) };
}

// Cluster join tokens: claims readable without the seed, signature checked with it, hash only stored.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { hashJoinToken, JOIN_TOKEN_PREFIX, newSeedSecret, readJoinTokenClaims, signJoinToken, verifyJoinToken } from "../../src/cluster/identity/join-token.js";

const claims = { jti: "abc", cid: "cluster-1", addrs: ["10.0.0.1:9090", "10.0.0.2:9090"], exp: 1_900_000_000_000, sg: 3, caf: "ab".repeat(32) };

describe("cluster join tokens", () => {
  it("round-trips the claims and verifies only with the signing seed", () => {
    const seed = newSeedSecret();
    const token = signJoinToken(claims, seed);
    assert.ok(token.startsWith(JOIN_TOKEN_PREFIX));
    const read = readJoinTokenClaims(token);
    assert.deepEqual({ ...read, k: undefined }, { v: 1, ...claims, k: undefined });
    assert.match(read!.k, /^[A-Za-z0-9_-]{22}$/);
    assert.deepEqual(verifyJoinToken(token, seed), read);
    assert.equal(verifyJoinToken(token, newSeedSecret()), null, "another seed (a rotation) refuses it");
  });

  it("two tokens with the same claims differ, and so do their hashes", () => {
    const seed = newSeedSecret();
    const a = signJoinToken(claims, seed);
    const b = signJoinToken(claims, seed);
    assert.notEqual(a, b);
    assert.match(hashJoinToken(a), /^[0-9a-f]{64}$/);
    assert.notEqual(hashJoinToken(a), hashJoinToken(b));
  });

  it("refuses tampered, truncated and foreign tokens", () => {
    const seed = newSeedSecret();
    const token = signJoinToken(claims, seed);
    const [body, signature] = token.split(".");
    const forged = JSON.parse(Buffer.from(body!.slice(JOIN_TOKEN_PREFIX.length), "base64url").toString());
    forged.addrs = ["evil:9090"];
    const tampered = `${JOIN_TOKEN_PREFIX}${Buffer.from(JSON.stringify(forged)).toString("base64url")}.${signature}`;
    assert.equal(verifyJoinToken(tampered, seed), null);
    assert.notEqual(readJoinTokenClaims(tampered), null, "claims are readable without the seed");
    for (const bad of ["", "cnt_abc", `${JOIN_TOKEN_PREFIX}.`, token.slice(0, -3), `${body}.`, `${JOIN_TOKEN_PREFIX}bm90IGpzb24.sig`, "x".repeat(20_000)]) {
      assert.equal(verifyJoinToken(bad, seed), null, bad.slice(0, 40));
    }
    assert.equal(readJoinTokenClaims(`${JOIN_TOKEN_PREFIX}bm90IGpzb24.sig`), null);
  });
});

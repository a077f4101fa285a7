import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import {
  hashToken,
  joinRetryGraceMs,
  NODE_TOKEN_CLAIMS_COLLECTION,
  NODE_TOKENS_COLLECTION,
  NodeTokenService,
  type StoredNodeToken,
  type StoredNodeTokenClaim,
} from "../../src/domain/node-tokens/node-token-service.js";
import { parseDurationSeconds, resolveTtlSeconds } from "../../src/domain/node-tokens/token-ttl.js";
import { apiError } from "./assertions.js";
import { openFixture } from "./domain-fixtures.js";

type Fixture = Awaited<ReturnType<typeof openFixture>>;

describe("NodeTokenService", () => {
  let fx: Fixture;
  let tokens: NodeTokenService;

  before(async () => {
    fx = await openFixture();
    tokens = new NodeTokenService(fx.store, fx.clock);
  });
  after(async () => fx.close());

  test("create returns the value once; the store holds only its sha256", async () => {
    const created = await tokens.create({}, "admin");
    assert.match(created.token, /^cnt_[A-Za-z0-9_-]{43}$/);
    assert.equal(created.status, "ACTIVE");
    assert.equal(created.nodeId, null);
    assert.equal(created.createdBy, "admin");
    assert.equal(Date.parse(created.expiresAt) - Date.parse(created.createdAt), 3600_000, "default ttl is 1h");
    const stored = (await fx.store.collection<StoredNodeToken>(NODE_TOKENS_COLLECTION).get(created.id)) as StoredNodeToken;
    assert.equal(stored.hash, hashToken(created.token));
    assert.equal(JSON.stringify(stored).includes(created.token), false);
    assert.equal(JSON.stringify(stored).includes(created.token.slice(4)), false);
  });

  test("list never carries the value or the hash", async () => {
    const created = await tokens.create({ nodeId: "node-1", ttl: "30m" }, "admin");
    const listed = (await tokens.list()).find((t) => t.id === created.id);
    assert.ok(listed);
    assert.equal(listed.nodeId, "node-1");
    assert.equal(Date.parse(listed.expiresAt) - Date.parse(listed.createdAt), 1800_000);
    const text = JSON.stringify(await tokens.list());
    assert.equal(text.includes(created.token), false);
    assert.equal(text.includes(hashToken(created.token)), false);
    assert.equal(text.includes("hash"), false);
  });

  test("consume admits one daemon once", async () => {
    const { token, id } = await tokens.create({}, "admin");
    const results = await Promise.all([tokens.consume(token, "node-x"), tokens.consume(token, "node-y")]);
    assert.equal(results.filter((r) => r.ok).length, 1);
    assert.deepEqual(
      results.find((r) => !r.ok),
      { ok: false, reason: "USED" },
    );
    const record = await tokens.get(id);
    assert.equal(record.status, "USED");
    assert.ok(record.usedByNodeId === "node-x" || record.usedByNodeId === "node-y");
    assert.deepEqual(await tokens.consume(token, "node-x"), { ok: false, reason: "USED" });
  });

  test("consume refuses unknown, revoked, expired and other-node tokens", async () => {
    assert.deepEqual(await tokens.consume("cnt_nope", "n"), { ok: false, reason: "UNKNOWN" });
    assert.deepEqual(await tokens.consume("garbage", "n"), { ok: false, reason: "UNKNOWN" });
    const bound = await tokens.create({ nodeId: "node-1" }, "admin");
    assert.deepEqual(await tokens.consume(bound.token, "node-2"), { ok: false, reason: "NODE_MISMATCH" });
    const revoked = await tokens.create({}, "admin");
    assert.equal((await tokens.revoke(revoked.id)).status, "ACTIVE", "revoke returns the record as it was");
    assert.equal((await tokens.get(revoked.id)).status, "REVOKED");
    await tokens.revoke(revoked.id);
    assert.deepEqual(await tokens.consume(revoked.token, "n"), { ok: false, reason: "REVOKED" });
    const expiring = await tokens.create({ ttlSeconds: 60 }, "admin");
    fx.clock.advance(60_000);
    assert.deepEqual(await tokens.consume(expiring.token, "n"), { ok: false, reason: "EXPIRED" });
    assert.equal((await tokens.get(expiring.id)).status, "EXPIRED");
    assert.deepEqual(await tokens.consume(bound.token, "node-1"), { ok: true, tokenId: bound.id, nodeId: "node-1", retry: false });
  });

  test("a consume with the key that claimed the token is a retry: same node id, nothing claimed; any other key or none is USED", async () => {
    const { token, id } = await tokens.create({}, "admin");
    const first = await tokens.consume(token, "node-new-1", { publicKeySha256: "aa", nodeIdProposed: true });
    assert.deepEqual(first, { ok: true, tokenId: id, nodeId: "node-new-1", retry: false });
    const claim = await fx.store.collection<StoredNodeTokenClaim>(NODE_TOKEN_CLAIMS_COLLECTION).get(id);
    assert.equal(claim?.publicKeySha256, "aa", "the claim that consumes the token records the key");
    assert.equal(claim?.nodeId, "node-new-1");
    // The retry proposes another new id: the claimed one is answered.
    assert.deepEqual(await tokens.consume(token, "node-new-2", { publicKeySha256: "aa", nodeIdProposed: true }), {
      ok: true,
      tokenId: id,
      nodeId: "node-new-1",
      retry: true,
    });
    assert.deepEqual(await tokens.consume(token, "node-new-1", { publicKeySha256: "aa" }), { ok: true, tokenId: id, nodeId: "node-new-1", retry: true });
    assert.deepEqual(
      await tokens.consume(token, "node-other", { publicKeySha256: "aa" }),
      { ok: false, reason: "USED" },
      "asking for another id is not a retry",
    );
    assert.deepEqual(await tokens.consume(token, "node-new-3", { publicKeySha256: "bb", nodeIdProposed: true }), { ok: false, reason: "USED" });
    assert.deepEqual(await tokens.consume(token, "node-new-1"), { ok: false, reason: "USED" });
    const record = await tokens.get(id);
    assert.equal(record.status, "USED");
    assert.equal(record.usedByNodeId, "node-new-1");
    // A revoked token admits no retry.
    await tokens.revoke(id);
    assert.deepEqual(await tokens.consume(token, "node-new-1", { publicKeySha256: "aa" }), { ok: false, reason: "REVOKED" });
  });

  test("a token consumed without a key admits no retry", async () => {
    const { token } = await tokens.create({}, "admin");
    assert.equal((await tokens.consume(token, "node-k")).ok, true);
    assert.deepEqual(await tokens.consume(token, "node-k", { publicKeySha256: "aa" }), { ok: false, reason: "USED" });
  });

  test("retries are accepted until the token expires, or until the grace period after the claim when that is later", async () => {
    const early = await tokens.create({ ttlSeconds: 3600 }, "admin");
    assert.equal((await tokens.consume(early.token, "node-e", { publicKeySha256: "cc" })).ok, true);
    fx.clock.advance(3600_000 - 1);
    assert.equal((await tokens.consume(early.token, "node-e", { publicKeySha256: "cc" })).ok, true, "just before expiry");
    fx.clock.advance(1);
    assert.deepEqual(await tokens.consume(early.token, "node-e", { publicKeySha256: "cc" }), { ok: false, reason: "USED" }, "at expiry");

    const late = await tokens.create({ ttlSeconds: 60 }, "admin");
    fx.clock.advance(59_000);
    assert.equal((await tokens.consume(late.token, "node-l", { publicKeySha256: "dd" })).ok, true);
    fx.clock.advance(joinRetryGraceMs - 1);
    assert.deepEqual(await tokens.consume(late.token, "node-l", { publicKeySha256: "dd" }), { ok: true, tokenId: late.id, nodeId: "node-l", retry: true });
    fx.clock.advance(1);
    assert.deepEqual(await tokens.consume(late.token, "node-l", { publicKeySha256: "dd" }), { ok: false, reason: "USED" });
  });

  test("two concurrent consumes with the same key both succeed with one node id; one of them claimed", async () => {
    const { token } = await tokens.create({}, "admin");
    const results = await Promise.all([
      tokens.consume(token, "node-c1", { publicKeySha256: "ee", nodeIdProposed: true }),
      tokens.consume(token, "node-c2", { publicKeySha256: "ee", nodeIdProposed: true }),
    ]);
    assert.ok(results.every((r) => r.ok));
    const ok = results.filter((r) => r.ok);
    assert.equal(new Set(ok.map((r) => r.nodeId)).size, 1);
    assert.deepEqual(ok.map((r) => r.retry).sort(), [false, true]);
  });

  test("a claim whose used mark was never written (a crash between the writes) is retried and the mark repaired", async () => {
    const { token, id } = await tokens.create({}, "admin");
    const claimedAt = new Date(fx.clock.nowMs()).toISOString();
    await fx.store.collection<StoredNodeTokenClaim>(NODE_TOKEN_CLAIMS_COLLECTION).insert({ _id: id, nodeId: "node-r", claimedAt, publicKeySha256: "ff" });
    assert.equal((await tokens.get(id)).status, "ACTIVE");
    assert.deepEqual(await tokens.consume(token, "node-r", { publicKeySha256: "00" }), { ok: false, reason: "USED" });
    assert.deepEqual(await tokens.consume(token, "node-x", { publicKeySha256: "ff", nodeIdProposed: true }), {
      ok: true,
      tokenId: id,
      nodeId: "node-r",
      retry: true,
    });
    const record = await tokens.get(id);
    assert.equal(record.status, "USED");
    assert.equal(record.usedByNodeId, "node-r");
    assert.equal(record.usedAt, claimedAt);
  });

  test("tokens disappear 7 days after they expire", async () => {
    const created = await tokens.create({ ttlSeconds: 60 }, "admin");
    fx.clock.advance(60_000 + 7 * 24 * 3600_000 - 1);
    assert.equal((await tokens.get(created.id)).status, "EXPIRED");
    fx.clock.advance(1);
    await assert.rejects(tokens.get(created.id), apiError(404, "NOT_FOUND", /^Token not found/));
  });

  test("revoke of an unknown id is 404", async () => {
    await assert.rejects(tokens.revoke("nope"), apiError(404, "NOT_FOUND", /^Token not found: nope$/));
  });

  test("ttl accepts seconds or duration text within 60 s .. 30 days", async () => {
    assert.equal(parseDurationSeconds("1h30m"), 5400);
    assert.equal(parseDurationSeconds("7d"), 604_800);
    assert.equal(parseDurationSeconds("90"), null);
    assert.equal(resolveTtlSeconds({}), 3600);
    assert.equal(resolveTtlSeconds({ ttlSeconds: 120 }), 120);
    assert.equal(resolveTtlSeconds({ ttl: "2h", ttlSeconds: 7200 }), 7200);
    await assert.rejects(tokens.create({ ttl: "soon" }, "a"), apiError(422, "VALIDATION_ERROR", /^ttl:/));
    await assert.rejects(tokens.create({ ttl: "10s" }, "a"), apiError(422, "VALIDATION_ERROR", /^ttl:/));
    await assert.rejects(tokens.create({ ttl: "31d" }, "a"), apiError(422, "VALIDATION_ERROR", /^ttl:/));
    await assert.rejects(tokens.create({ ttlSeconds: 59 }, "a"), apiError(422, "VALIDATION_ERROR", /^ttlSeconds:/));
    await assert.rejects(tokens.create({ ttl: "1h", ttlSeconds: 60 }, "a"), apiError(422, "VALIDATION_ERROR", /^ttl:/));
    await assert.rejects(tokens.create({ nodeId: "bad id" }, "a"), apiError(422, "VALIDATION_ERROR", /^nodeId:/));
  });
});

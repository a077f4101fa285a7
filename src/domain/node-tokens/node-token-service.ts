/**
 * Node join tokens: single-use credentials a daemon presents once to join (spec document 1, "Node
 * join tokens"). The value is `cnt_` + 32 random bytes in base64url, returned only by `create`;
 * the store keeps its sha256 (collection `node_tokens`). A join claims the token by inserting its id
 * into `node_token_claims`, whose primary key makes a second claim fail on every adapter, so a
 * token admits one daemon even when several controllers race.
 *
 * A daemon that keeps its own key sends the public key with the join; the claim records its
 * SHA-256 next to the node id, in the same insert that consumes the token. A later consume with the
 * same token and the same key (the daemon retrying a join whose answer it never received) is a
 * retry: it answers the claimed node id again until {@link joinRetryDeadlineMs}, and claims nothing.
 */
import { createHash, randomBytes, randomUUID, timingSafeEqual } from "node:crypto";
import type { Clock } from "../../shared/clock.js";
import { notFound } from "../../shared/errors.js";
import { DuplicateKeyError, type Collection, type Doc, type DocumentStore } from "../../store/ports.js";
import { KeyedMutex, type KeyedLock } from "../shared/keyed-mutex.js";
import { isoFromMs } from "../shared/time.js";
import { checkSchema } from "../shared/validate.js";
import { NodeTokenCreateSchema, type CreatedNodeToken, type NodeToken, type NodeTokenCreate, type TokenStatus } from "./node-token-schemas.js";
import { resolveTtlSeconds, tokenTtlSecondsMax } from "./token-ttl.js";

/** Collection of token records (hashes, never values), owned by {@link NodeTokenService}. */
export const NODE_TOKENS_COLLECTION = "node_tokens";
/** One document per consumed token; its primary key makes a claim single-use. */
export const NODE_TOKEN_CLAIMS_COLLECTION = "node_token_claims";
/** Prefix of every token value, so a leaked token is recognizable. */
export const NODE_TOKEN_PREFIX = "cnt_";
const tokenSecretBytes = 32;
/** Tokens stay listed this long after they expire, then the store's TTL index removes them. */
export const tokenRetentionAfterExpirySeconds = 7 * 24 * 3600;
/** A claim outlives every token it could protect: the longest lifetime plus the retention. */
const claimRetentionSeconds = tokenTtlSecondsMax + tokenRetentionAfterExpirySeconds;
/** The list answers at most this many tokens, newest first. */
export const tokenListMax = 1000;
/**
 * A retry is accepted while the token is valid, and at least this long after the claim (a token
 * consumed just before it expired can still be retried).
 */
export const joinRetryGraceMs = 10 * 60 * 1000;

/** The stored token: metadata and the sha256 (hex) of the value. */
export interface StoredNodeToken extends Doc {
  hash: string;
  nodeId: string | null;
  createdAt: string;
  createdBy: string;
  expiresAt: string;
  usedAt: string | null;
  usedByNodeId: string | null;
  revokedAt: string | null;
}

/** The claim that consumed a token: written once, by the insert that makes the token single-use. */
export interface StoredNodeTokenClaim extends Doc {
  nodeId: string;
  claimedAt: string;
  /** SHA-256 (hex) of the DER public key (SPKI) the daemon joined with; absent when the controller generated the key. */
  publicKeySha256?: string;
}

/** Why a join token was refused. */
export type TokenRejection = "UNKNOWN" | "EXPIRED" | "REVOKED" | "USED" | "NODE_MISMATCH";

/** Options of {@link NodeTokenService.consume}. */
export interface TokenConsumeOptions {
  /** SHA-256 (hex) of the daemon's own public key (SPKI DER); recorded with the claim, and what makes a retry. */
  publicKeySha256?: string;
  /**
   * True when `nodeId` was not asked for by the daemon (the controller proposed a new one): a
   * retry then answers the claimed id. Otherwise a retry must ask for the claimed id.
   */
  nodeIdProposed?: boolean;
}

/**
 * Outcome of {@link NodeTokenService.consume}: an expected failure is a value, not an exception.
 * `retry` is true when the token had already been consumed by the same public key and nothing was claimed now.
 */
export type TokenConsumeResult = { ok: true; tokenId: string; nodeId: string; retry: boolean } | { ok: false; reason: TokenRejection };

/** Issues, lists, revokes and consumes node join tokens. */
export class NodeTokenService {
  private readonly tokens: Collection<StoredNodeToken>;
  private readonly claims: Collection<StoredNodeTokenClaim>;
  /** Serializes the record updates of one token (revoke and the used mark never overwrite each other). */
  private readonly writes: KeyedLock;

  constructor(
    store: DocumentStore,
    private readonly clock: Clock,
    /** Cluster-wide when the controller passes a key-value lock (several controllers revoke and redeem). */
    writes: KeyedLock = new KeyedMutex(),
  ) {
    this.writes = writes;
    this.tokens = store.collection<StoredNodeToken>(NODE_TOKENS_COLLECTION, {
      indexes: [
        { name: "node_tokens_hash", field: "hash", unique: true },
        { name: "node_tokens_created", field: "createdAt" },
      ],
      ttl: { name: "node_tokens_ttl", field: "expiresAt", seconds: tokenRetentionAfterExpirySeconds },
    });
    this.claims = store.collection<StoredNodeTokenClaim>(NODE_TOKEN_CLAIMS_COLLECTION, {
      ttl: { name: "node_token_claims_ttl", field: "claimedAt", seconds: claimRetentionSeconds },
    });
  }

  /** Issues a token; the returned `token` value is never available again. */
  async create(input: NodeTokenCreate, createdBy: string): Promise<CreatedNodeToken> {
    checkSchema(NodeTokenCreateSchema, input, "body");
    const ttlSeconds = resolveTtlSeconds(input);
    const nowMs = this.clock.nowMs();
    const token = NODE_TOKEN_PREFIX + randomBytes(tokenSecretBytes).toString("base64url");
    const doc: StoredNodeToken = {
      _id: randomUUID(),
      hash: hashToken(token),
      nodeId: input.nodeId ?? null,
      createdAt: isoFromMs(nowMs),
      createdBy,
      expiresAt: isoFromMs(nowMs + ttlSeconds * 1000),
      usedAt: null,
      usedByNodeId: null,
      revokedAt: null,
    };
    await this.tokens.insert(doc);
    return { ...this.toRecord(doc, nowMs), token };
  }

  /** Tokens, newest first, without values or hashes. */
  async list(): Promise<NodeToken[]> {
    const nowMs = this.clock.nowMs();
    const docs = await this.tokens.find({}, { sort: { field: "createdAt", direction: -1 }, limit: tokenListMax });
    return docs.map((doc) => this.toRecord(doc, nowMs));
  }

  /** One token; 404 `Token not found: <id>`. */
  async get(id: string): Promise<NodeToken> {
    return this.toRecord(await this.require(id), this.clock.nowMs());
  }

  /** Revokes a token (idempotent) and returns it as it was before. */
  async revoke(id: string): Promise<NodeToken> {
    return this.writes.run(id, async () => {
      const doc = await this.require(id);
      const nowMs = this.clock.nowMs();
      if (doc.revokedAt === null) await this.tokens.put({ ...doc, revokedAt: isoFromMs(nowMs) });
      return this.toRecord(doc, nowMs);
    });
  }

  /**
   * Checks a presented token and claims it for `nodeId`: at most one call ever claims a token.
   * A token bound to a node id admits only that node. With `publicKeySha256`, a token already
   * claimed with that same key is a retry (see the module comment); any other key, or none, is USED.
   */
  async consume(token: string, nodeId: string, options: TokenConsumeOptions = {}): Promise<TokenConsumeResult> {
    if (!token.startsWith(NODE_TOKEN_PREFIX)) return { ok: false, reason: "UNKNOWN" };
    const presented = Buffer.from(hashToken(token), "hex");
    const [doc] = await this.tokens.find({ hash: presented.toString("hex") }, { limit: 1 });
    if (!doc) return { ok: false, reason: "UNKNOWN" };
    const stored = Buffer.from(doc.hash, "hex");
    if (stored.length !== presented.length || !timingSafeEqual(stored, presented)) return { ok: false, reason: "UNKNOWN" };
    const nowMs = this.clock.nowMs();
    const status = statusOf(doc, nowMs);
    if (status === "REVOKED") return { ok: false, reason: status };
    // USED, or EXPIRED with a claim whose used mark was never written (a crash between the writes).
    if (status !== "ACTIVE" && options.publicKeySha256 !== undefined) {
      const retried = await this.retry(doc, nodeId, options, nowMs);
      if (retried) return retried;
    }
    if (status !== "ACTIVE") return { ok: false, reason: status };
    if (doc.nodeId !== null && doc.nodeId !== nodeId) return { ok: false, reason: "NODE_MISMATCH" };
    const claim: StoredNodeTokenClaim = { _id: doc._id, nodeId, claimedAt: isoFromMs(nowMs) };
    if (options.publicKeySha256 !== undefined) claim.publicKeySha256 = options.publicKeySha256;
    try {
      await this.claims.insert(claim);
    } catch (err) {
      if (!(err instanceof DuplicateKeyError)) throw err;
      // Claimed meanwhile (by another controller, or by this daemon's earlier attempt still in flight).
      if (options.publicKeySha256 !== undefined) {
        const retried = await this.retry(doc, nodeId, options, nowMs);
        if (retried) return retried;
      }
      return { ok: false, reason: "USED" };
    }
    await this.markUsed(doc, nodeId, nowMs);
    return { ok: true, tokenId: doc._id, nodeId, retry: false };
  }

  /**
   * The retry of a join whose answer was lost: the token's claim was made with the same public
   * key, the token is not revoked, the retry comes before {@link joinRetryDeadlineMs}, and it asks
   * for the claimed node id (or for none). Null when it is not a retry.
   */
  private async retry(doc: StoredNodeToken, nodeId: string, options: TokenConsumeOptions, nowMs: number): Promise<TokenConsumeResult | null> {
    const claim = await this.claims.get(doc._id);
    if (!claim || claim.publicKeySha256 === undefined || claim.publicKeySha256 !== options.publicKeySha256) return null;
    if (nowMs >= joinRetryDeadlineMs(doc, claim)) return null;
    if (!options.nodeIdProposed && claim.nodeId !== nodeId) return null;
    // Revoked since this consume read the record (the claim is older than the revocation).
    const current = (await this.tokens.get(doc._id)) ?? doc;
    if (current.revokedAt !== null) return null;
    if (current.usedAt === null) await this.markUsed(doc, claim.nodeId, Date.parse(claim.claimedAt));
    return { ok: true, tokenId: doc._id, nodeId: claim.nodeId, retry: true };
  }

  private async markUsed(doc: StoredNodeToken, nodeId: string, usedAtMs: number): Promise<void> {
    await this.writes.run(doc._id, async () => {
      const current = (await this.tokens.get(doc._id)) ?? doc;
      if (current.usedAt !== null) return;
      await this.tokens.put({ ...current, usedAt: isoFromMs(usedAtMs), usedByNodeId: nodeId });
    });
  }

  private async require(id: string): Promise<StoredNodeToken> {
    const doc = await this.tokens.get(id);
    if (!doc) throw notFound(`Token not found: ${id}`);
    return doc;
  }

  private toRecord(doc: StoredNodeToken, nowMs: number): NodeToken {
    return {
      id: doc._id,
      nodeId: doc.nodeId,
      status: statusOf(doc, nowMs),
      createdAt: doc.createdAt,
      createdBy: doc.createdBy,
      expiresAt: doc.expiresAt,
      usedAt: doc.usedAt,
      usedByNodeId: doc.usedByNodeId,
      revokedAt: doc.revokedAt,
    };
  }
}

/** sha256 of a token value, hex. */
export function hashToken(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("hex");
}

/** Until when a join with a consumed token and the same key is a retry: expiry, but at least {@link joinRetryGraceMs} after the claim. */
export function joinRetryDeadlineMs(doc: Pick<StoredNodeToken, "expiresAt">, claim: Pick<StoredNodeTokenClaim, "claimedAt">): number {
  return Math.max(Date.parse(doc.expiresAt), Date.parse(claim.claimedAt) + joinRetryGraceMs);
}

function statusOf(doc: StoredNodeToken, nowMs: number): TokenStatus {
  if (doc.revokedAt !== null) return "REVOKED";
  if (doc.usedAt !== null) return "USED";
  if (Date.parse(doc.expiresAt) <= nowMs) return "EXPIRED";
  return "ACTIVE";
}

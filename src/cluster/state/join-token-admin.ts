/**
 * Join tokens as the cluster issues them: signed with the Raft-held seed secret, recorded in the
 * cluster state by their hash only, revoked one by one, or all at once by rotating the seed.
 */
import type { Clock } from "../../shared/clock.js";
import { notFound } from "../../shared/errors.js";
import type { AppliedCommand, UnstampedCommand } from "./cluster-commands.js";
import { refusalError } from "./cluster-errors.js";
import { joinTokenTtlSecondsDefault, type CreatedJoinToken, type JoinToken, type SeedRotation } from "./cluster-schemas.js";
import type { ClusterStateMachine, JoinTokenRecord, SeedState } from "./cluster-state-machine.js";
import { caFingerprint, iso, joinTokenView } from "./cluster-views.js";
import { hashJoinToken, newJoinTokenId, newSeedSecret, signJoinToken } from "../identity/join-token.js";

/** What the token administration needs of the cluster service. */
export interface JoinTokenAdminDeps {
  /** The applied cluster state; its meta is stamped (the caller checked). */
  state: Pick<ClusterStateMachine, "seed" | "material" | "tokens">;
  clock: Clock;
  clusterId(): string;
  /** Applies a command through the leader (see `LeaderWrites.commit`). */
  commit<T>(command: UnstampedCommand): Promise<AppliedCommand<T>>;
  /** Waits (bounded) until this controller applied `index`. */
  waitApplied(index: number): Promise<void>;
}

/**
 * Issues, revokes and invalidates cluster join tokens. A refusal of the state machine becomes the
 * spec's error (`refusalError`); the token value leaves the cluster only in the answer to its
 * issue. Callers check that the cluster meta is stamped first (409 CLUSTER_NOT_READY).
 */
export class JoinTokenAdmin {
  constructor(private readonly deps: JoinTokenAdminDeps) {}

  /**
   * Issues a token carrying `joinAddrs`, valid for `ttlSeconds` (the default TTL otherwise). When
   * the seed rotated between signing and committing, it is signed once more with the new seed.
   */
  async issue(input: { joinAddrs: readonly string[]; ttlSeconds?: number; label?: string }, by: string): Promise<CreatedJoinToken> {
    const { state, clock } = this.deps;
    const ttlMs = (input.ttlSeconds ?? joinTokenTtlSecondsDefault) * 1000;
    for (let attempt = 0; ; attempt++) {
      const seed = state.seed()!;
      const material = state.material()!;
      const jti = newJoinTokenId();
      const createdAtMs = clock.nowMs();
      const expiresAtMs = createdAtMs + ttlMs;
      const token = signJoinToken(
        { jti, cid: this.deps.clusterId(), addrs: [...input.joinAddrs], exp: expiresAtMs, sg: seed.generation, caf: caFingerprint(material.caCertPem) },
        seed.secret,
      );
      const result = await this.deps.commit<JoinTokenRecord>({
        op: "token.issue",
        jti,
        label: input.label ?? "",
        hash: hashJoinToken(token),
        seedGeneration: seed.generation,
        joinAddrs: [...input.joinAddrs],
        createdAtMs,
        expiresAtMs,
        by,
      });
      // The seed rotated between reading it and committing: sign again with the new one.
      if (!result.ok && result.code === "SEED_ROTATED" && attempt === 0) {
        await this.deps.waitApplied(result.index);
        continue;
      }
      if (!result.ok) throw refusalError(result.code, result.message);
      return { jti, token, expiresAt: iso(expiresAtMs) };
    }
  }

  /** Revokes an ACTIVE join token; 404 JOIN_TOKEN_NOT_FOUND for an unknown one. */
  async revoke(jti: string, by: string): Promise<JoinToken> {
    if (!this.deps.state.tokens().some((t) => t.jti === jti)) throw notFound(`Join token not found: ${jti}`, "JOIN_TOKEN_NOT_FOUND");
    const result = await this.deps.commit<JoinTokenRecord>({ op: "token.revoke", jti, by });
    if (!result.ok) throw refusalError(result.code, result.message);
    return joinTokenView(result.value, this.deps.clock.nowMs());
  }

  /** Rotates the seed secret: every outstanding join token becomes invalid. */
  async rotateSeed(by: string): Promise<SeedRotation> {
    const result = await this.deps.commit<SeedState>({ op: "seed.rotate", secret: newSeedSecret(), by });
    if (!result.ok) throw refusalError(result.code, result.message);
    return { clusterId: this.deps.clusterId(), rotatedBy: result.value.rotatedBy, rotatedAt: iso(result.value.rotatedAtMs) };
  }
}

/**
 * What outlives a workload token's signature check: its family's rotations and revocation, and
 * the revocation of its instance's start. Kept in the document store (not the key-value store), so
 * a Redis that lost its data brings no revoked or rotated-out token back, and read on every
 * verification with no cache, so a revocation holds on every controller from its next request.
 *
 * - A **family** is the chain of tokens that began with one token a start command carried: each
 *   refresh hands out the next **generation** (`gen`) of the same family (`fid`). The family's
 *   document (`workload_token_families/<fid>`, written only when the family rotates or is revoked)
 *   holds its current generation, when it moved there, and whether the family is revoked. A token
 *   is accepted when its generation is the current one, or the one before during the rotation grace;
 *   revoking any token of a family revokes all of it, descendants included.
 * - Revoking an **instance** (`workload_token_revocations/<instanceId>`) refuses every token of its
 *   current start, whenever issued, and every token issued to it until then; its next start (a new
 *   start id) gets working ones.
 *
 * Both documents expire once no token they speak for can still be unexpired (a token lives 24 h;
 * a family's newest token is never older than its document's last write). Rotations and
 * revocations of one family are serialised across controllers (`lock`), so a rotation never writes
 * over a revocation.
 */
import type { KeyedLock } from "../domain/shared/keyed-mutex.js";
import { isoFromMs } from "../domain/shared/time.js";
import type { Clock } from "../shared/clock.js";
import type { Collection, Doc, DocumentStore } from "../store/ports.js";

/** Lifetime of a workload token; the plugin renews it through `/api/plugin/auth/refresh`. */
export const workloadTokenTtlMs = 24 * 60 * 60 * 1000;
/**
 * How long a token replaced by `/api/plugin/auth/refresh` keeps working: requests already sent with
 * it (the plugin's request timeout is 10 s) still land; afterwards only the new token works.
 */
export const workloadTokenRotationGraceMs = 10_000;
/**
 * How long a family or revocation document is kept after its last write: longer than any token it
 * speaks for lives. A start revoked while it was still being dispatched gets tokens after the
 * revocation, but only until its start timeout (minutes), well inside the margin.
 */
export const workloadTokenStateRetentionMs = workloadTokenTtlMs + 60 * 60 * 1000;

export const WORKLOAD_TOKEN_FAMILIES_COLLECTION = "workload_token_families";
export const WORKLOAD_TOKEN_REVOCATIONS_COLLECTION = "workload_token_revocations";

/** What a token says about itself, as far as its family and start are concerned. */
export interface WorkloadTokenFacts {
  instanceId: string;
  startId: string;
  familyId: string;
  generation: number;
  issuedAtMs: number;
}

interface FamilyDoc extends Doc {
  instanceId: string;
  generation: number;
  /** When the family moved to `generation` (the previous generation's grace starts here). */
  rotatedAtMs: number | null;
  revokedAtMs: number | null;
  writtenAt: string;
}

interface RevocationDoc extends Doc {
  instanceId: string;
  /** The start whose tokens are refused whenever issued ("" when the record named no start). */
  startId: string;
  /** Tokens of the instance issued at or before this epoch ms are refused, whatever their start. */
  revokedUpToMs: number;
  writtenAt: string;
}

/** Whether a token with `facts` is accepted, given its family's and its instance's documents. */
function accepted(facts: WorkloadTokenFacts, family: FamilyDoc | null, revocation: RevocationDoc | null, nowMs: number): boolean {
  if (revocation && (revocation.startId === facts.startId || facts.issuedAtMs <= revocation.revokedUpToMs)) return false;
  if (family?.revokedAtMs != null) return false;
  const current = family?.generation ?? 0;
  if (facts.generation === current) return true;
  return facts.generation === current - 1 && family?.rotatedAtMs != null && nowMs < family.rotatedAtMs + workloadTokenRotationGraceMs;
}

/** The durable rotation and revocation state of workload tokens; see the module comment. */
export class WorkloadTokenState {
  private readonly families: Collection<FamilyDoc>;
  private readonly revocations: Collection<RevocationDoc>;
  private readonly retentionSeconds = Math.ceil(workloadTokenStateRetentionMs / 1000);

  constructor(
    documents: DocumentStore,
    private readonly clock: Clock,
    private readonly lock: KeyedLock,
  ) {
    this.families = documents.collection<FamilyDoc>(WORKLOAD_TOKEN_FAMILIES_COLLECTION, {
      ttl: { name: "workload_token_families_ttl", field: "writtenAt", seconds: this.retentionSeconds },
    });
    this.revocations = documents.collection<RevocationDoc>(WORKLOAD_TOKEN_REVOCATIONS_COLLECTION, {
      ttl: { name: "workload_token_revocations_ttl", field: "writtenAt", seconds: this.retentionSeconds },
    });
  }

  /** Whether a token with `facts` is still accepted: not revoked, and not rotated out beyond the grace. */
  async accepts(facts: WorkloadTokenFacts): Promise<boolean> {
    const [family, revocation] = await Promise.all([this.families.get(facts.familyId), this.revocations.get(facts.instanceId)]);
    return accepted(facts, family, revocation, this.clock.nowMs());
  }

  /**
   * A refresh with the token of `facts`: the generation the new token carries, or null when the
   * token is no longer accepted. The current generation moves the family on (written before the
   * answer); the previous one, inside its grace, gets another token of the current generation and
   * never moves the grace's start (the answer to the first refresh may have been lost).
   */
  rotate(facts: WorkloadTokenFacts): Promise<number | null> {
    return this.lock.run(facts.familyId, async () => {
      const [family, revocation] = await Promise.all([this.families.get(facts.familyId), this.revocations.get(facts.instanceId)]);
      const nowMs = this.clock.nowMs();
      if (!accepted(facts, family, revocation, nowMs)) return null;
      const current = family?.generation ?? 0;
      if (facts.generation < current) return current;
      const next = current + 1;
      await this.families.put({
        _id: facts.familyId,
        instanceId: facts.instanceId,
        generation: next,
        rotatedAtMs: nowMs,
        revokedAtMs: null,
        writtenAt: isoFromMs(nowMs),
      });
      return next;
    });
  }

  /** Revokes the whole family of the token of `facts`: every generation, before and after it. */
  revokeFamily(facts: WorkloadTokenFacts): Promise<void> {
    return this.lock.run(facts.familyId, async () => {
      const family = await this.families.get(facts.familyId);
      const nowMs = this.clock.nowMs();
      await this.families.put({
        _id: facts.familyId,
        instanceId: facts.instanceId,
        generation: family?.generation ?? 0,
        rotatedAtMs: family?.rotatedAtMs ?? null,
        revokedAtMs: family?.revokedAtMs ?? nowMs,
        writtenAt: isoFromMs(nowMs),
      });
    });
  }

  /** Refuses every token of the instance's start `startId` and every token issued to it until now. */
  async revokeStart(instanceId: string, startId: string): Promise<void> {
    const nowMs = this.clock.nowMs();
    await this.revocations.put({ _id: instanceId, instanceId, startId, revokedUpToMs: nowMs, writtenAt: isoFromMs(nowMs) });
  }
}

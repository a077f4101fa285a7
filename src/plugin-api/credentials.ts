/**
 * Credentials the controller issues to machines rather than people:
 * - a **workload token** per instance (`CLOUD_WORKLOAD_TOKEN`), with which the in-server plugin calls
 *   `/api/plugin/*`; valid while it has not expired and its instance is neither STOPPED nor CRASHED;
 * - a **node credential** per daemon (sent on the daemon stream), with which the daemon fetches
 *   template manifests and blobs; it grants `templates.view` and nothing else.
 *
 * Both are HMAC-SHA256-signed tokens `<kind>.<payload>.<signature>` (base64url) under a secret kept
 * in the document store, so every controller sharing the store verifies them and they survive
 * restarts. They are made synchronously (the daemon handshake cannot wait for a signer).
 *
 * A workload token carries its own id (`tid`) and the id of the start it was issued for (`sid`,
 * kept across rotations). Rotation and revocation are written to the key-value store, which every
 * controller reads on each verification: a rotated token stops working once its grace is over, a
 * revoked one at once, on every controller (docs/decisions/plugin-api.md).
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import type { Principal } from "../auth/principal.js";
import { loadOrCreateSigningSecret } from "../auth/signing-key.js";
import type { Clock } from "../shared/clock.js";
import type { DocumentStore, KvStore } from "../store/ports.js";
import { KV_KEY_PREFIX } from "../coordination/keys.js";

/** Document id of the machine-credential secret in `system_secrets`. */
export const MACHINE_SECRET_ID = "machine-credential-key";
/** Lifetime of a workload token; the plugin renews it through `/api/plugin/auth/refresh`. */
export const workloadTokenTtlMs = 24 * 60 * 60 * 1000;
/** Lifetime of a node credential; a connected daemon gets a fresh one every half lifetime. */
export const nodeCredentialTtlMs = 24 * 60 * 60 * 1000;
/**
 * How long a token replaced by `/api/plugin/auth/refresh` keeps working: requests already sent with
 * it (the plugin's request timeout is 10 s) still land; afterwards only the new token works.
 */
export const workloadTokenRotationGraceMs = 10_000;
/** Longest token accepted for verification (a bound before any decoding). */
export const machineTokenCharsMax = 2_048;

/** Permissions of a daemon's node credential. */
export const NODE_PERMISSIONS: ReadonlySet<string> = new Set(["templates.view", "catalog.view"]);

/** A token and when it stops being accepted. */
export interface IssuedCredential {
  token: string;
  expiresAtMs: number;
}

/** Who an instance is, as its workload token says. */
export interface WorkloadIdentity {
  instanceId: string;
  group: string;
  node: string;
}

/** A verified workload token: the identity and the token's own facts. */
export interface VerifiedWorkload extends WorkloadIdentity {
  /** The token's id (`tid`); empty for tokens issued before ids existed. */
  tokenId: string;
  /** The start the token belongs to (`sid`, kept by rotation); empty for tokens issued before. */
  startId: string;
  issuedAtMs: number;
  expiresAtMs: number;
}

/** `cloud:v1:workload:revoked:<tokenId>`: epoch ms from which the token is refused. */
export const revokedWorkloadTokenKey = (tokenId: string): string => `${KV_KEY_PREFIX}workload:revoked:${tokenId}`;
/** `cloud:v1:workload:revoked-instance:<instanceId>`: tokens of the instance issued at or before this epoch ms are refused. */
export const revokedWorkloadInstanceKey = (instanceId: string): string => `${KV_KEY_PREFIX}workload:revoked-instance:${instanceId}`;

/** Whether an instance still runs (or is on its way): finished instances lose their tokens. */
export type InstanceLiveness = (instanceId: string) => Promise<boolean>;

type Kind = "wl" | "nd";

/** Issues and verifies workload tokens and node credentials. */
export class MachineCredentials {
  private constructor(
    private readonly secret: Uint8Array,
    private readonly clock: Clock,
    private readonly isLive: InstanceLiveness,
    private readonly kv: KvStore | null,
  ) {}

  /**
   * Loads (or creates) the shared secret. Without `kv` (tests of the signing alone) tokens can be
   * neither rotated nor revoked.
   */
  static async open(documents: DocumentStore, clock: Clock, isLive: InstanceLiveness, kv: KvStore | null = null): Promise<MachineCredentials> {
    return new MachineCredentials(await loadOrCreateSigningSecret(documents, clock, MACHINE_SECRET_ID), clock, isLive, kv);
  }

  /** A token for a new start of the instance (a new start id), or for `startId` when rotating. */
  issueWorkloadToken(identity: WorkloadIdentity, startId?: string): IssuedCredential & { tokenId?: string } {
    const nowMs = this.clock.nowMs();
    const expiresAtMs = nowMs + workloadTokenTtlMs;
    const tokenId = randomBytes(12).toString("base64url");
    const claims = {
      iid: identity.instanceId,
      grp: identity.group,
      node: identity.node,
      tid: tokenId,
      sid: startId ?? randomBytes(12).toString("base64url"),
      iat: nowMs,
      exp: expiresAtMs,
    };
    return { token: this.sign("wl", claims), expiresAtMs, tokenId };
  }

  /**
   * Rotation (`/api/plugin/auth/refresh`): a new token of the same start; the presented one keeps
   * working for {@link workloadTokenRotationGraceMs}, then is refused. A second refresh with the
   * old token inside the grace gets another new token but never moves the old one's deadline.
   */
  async rotateWorkloadToken(current: VerifiedWorkload): Promise<IssuedCredential & { tokenId?: string }> {
    const issued = this.issueWorkloadToken(current, current.startId || undefined);
    if (this.kv && current.tokenId) {
      const remainingMs = Math.max(1, current.expiresAtMs - this.clock.nowMs());
      await this.kv.setIfAbsent(revokedWorkloadTokenKey(current.tokenId), String(this.clock.nowMs() + workloadTokenRotationGraceMs), { ttlMs: remainingMs });
    }
    return issued;
  }

  /**
   * Revokes one workload token at once, on every controller. Returns its identity, or null when
   * the text is not a workload token of ours (bad signature, expired, unreadable).
   */
  async revokeWorkloadToken(token: string): Promise<(WorkloadIdentity & { tokenId: string }) | null> {
    const claims = this.open("wl", token);
    const identity = claims && identityOf(claims);
    if (!identity || !identity.tokenId || !this.kv) return null;
    const remainingMs = Math.max(1, identity.expiresAtMs - this.clock.nowMs());
    await this.kv.set(revokedWorkloadTokenKey(identity.tokenId), String(this.clock.nowMs()), { ttlMs: remainingMs });
    return identity;
  }

  /** Revokes every workload token issued to the instance until now (a later start gets working ones). */
  async revokeInstanceTokens(instanceId: string): Promise<void> {
    if (!this.kv) return;
    await this.kv.set(revokedWorkloadInstanceKey(instanceId), String(this.clock.nowMs()), { ttlMs: workloadTokenTtlMs });
  }

  issueNodeCredential(nodeId: string): IssuedCredential {
    const expiresAtMs = this.clock.nowMs() + nodeCredentialTtlMs;
    return { token: this.sign("nd", { node: nodeId, exp: expiresAtMs }), expiresAtMs };
  }

  /** The identity behind a workload token that is valid now (signed, unexpired, not revoked, its instance live), else null. */
  async verifyWorkloadToken(token: string): Promise<VerifiedWorkload | null> {
    const claims = this.open("wl", token);
    const identity = claims && identityOf(claims);
    if (!identity) return null;
    const [live, revoked] = await Promise.all([this.isLive(identity.instanceId), this.isRevoked(identity)]);
    return live && !revoked ? identity : null;
  }

  private async isRevoked(identity: VerifiedWorkload): Promise<boolean> {
    if (!this.kv) return false;
    const [tokenFrom, instanceUpTo] = await Promise.all([
      identity.tokenId ? this.kv.get(revokedWorkloadTokenKey(identity.tokenId)) : Promise.resolve(null),
      this.kv.get(revokedWorkloadInstanceKey(identity.instanceId)),
    ]);
    const nowMs = this.clock.nowMs();
    if (tokenFrom !== null && nowMs >= Number(tokenFrom)) return true;
    return instanceUpTo !== null && identity.issuedAtMs <= Number(instanceUpTo);
  }

  /** A principal for a valid workload token or node credential, else null (the auth service's hook). */
  async principalOf(token: string): Promise<Principal | null> {
    if (token.startsWith("nd.")) {
      const claims = this.open("nd", token);
      if (!claims || typeof claims.node !== "string") return null;
      return { kind: "user", username: `node:${claims.node}`, roles: ["NODE"], permissions: NODE_PERMISSIONS };
    }
    const workload = await this.verifyWorkloadToken(token);
    if (!workload) return null;
    return { kind: "workload", username: `instance:${workload.instanceId}`, roles: [], permissions: new Set(), instanceId: workload.instanceId, workload };
  }

  private sign(kind: Kind, claims: Record<string, string | number>): string {
    const payload = Buffer.from(JSON.stringify(claims)).toString("base64url");
    return `${kind}.${payload}.${this.mac(kind, payload)}`;
  }

  /** The claims of an unexpired token of `kind` with a valid signature, else null. */
  private open(kind: Kind, token: string): Record<string, unknown> | null {
    if (token.length > machineTokenCharsMax) return null;
    const parts = token.split(".");
    if (parts.length !== 3 || parts[0] !== kind) return null;
    const expected = Buffer.from(this.mac(kind, parts[1]));
    const given = Buffer.from(parts[2]);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) return null;
    let claims: Record<string, unknown>;
    try {
      claims = JSON.parse(Buffer.from(parts[1], "base64url").toString("utf8")) as Record<string, unknown>;
    } catch {
      // Unreadable claims make an invalid credential: refused like a bad signature.
      return null;
    }
    if (typeof claims.exp !== "number" || claims.exp <= this.clock.nowMs()) return null;
    return claims;
  }

  private mac(kind: Kind, payload: string): string {
    return createHmac("sha256", this.secret).update(`${kind}.${payload}`).digest("base64url");
  }
}

/** The identity in a workload token's claims; null when a required claim is missing. */
function identityOf(claims: Record<string, unknown>): VerifiedWorkload | null {
  if (typeof claims.iid !== "string" || typeof claims.grp !== "string" || typeof claims.node !== "string" || typeof claims.exp !== "number") return null;
  return {
    instanceId: claims.iid,
    group: claims.grp,
    node: claims.node,
    tokenId: typeof claims.tid === "string" ? claims.tid : "",
    startId: typeof claims.sid === "string" ? claims.sid : "",
    // Tokens from before `iat` existed count as issued a lifetime before their expiry.
    issuedAtMs: typeof claims.iat === "number" ? claims.iat : claims.exp - workloadTokenTtlMs,
    expiresAtMs: claims.exp,
  };
}

/**
 * Credentials the controller issues to machines rather than people:
 * - a **workload token** per instance (`CLOUD_WORKLOAD_TOKEN`), with which the in-server plugin calls
 *   `/api/plugin/*`; valid while it has not expired, its instance's record is live and names the
 *   token's start, and neither its family nor its start was revoked;
 * - a **node credential** per daemon (sent on the daemon stream), with which the daemon fetches
 *   template manifests and blobs; it grants `templates.view` and nothing else, and dies with the
 *   node's deletion or its certificate's revocation.
 *
 * Both are HMAC-SHA256-signed tokens `<kind>.<payload>.<signature>` (base64url) under a secret kept
 * in the document store, so every controller sharing the store verifies them and they survive
 * restarts. They are made synchronously (the daemon handshake cannot wait for a signer).
 *
 * A workload token carries its own id (`tid`), the start it was issued for (`sid`: the instance
 * record's `startId`, compared on every use, so a STATIC slot's earlier starts lose their tokens),
 * its family (`fid`: one per token a start command carried, kept by every refresh) and its
 * generation in that family (`gen`). Rotation and revocation are kept in the document store
 * (`workload-token-state.ts`) and read on every verification (docs/decisions/plugin-api.md).
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import type { Principal } from "../auth/principal.js";
import { loadOrCreateSigningSecret } from "../auth/signing-key.js";
import { FINISHED_STATES, type InstanceState } from "../domain/instances/instance-schemas.js";
import { NODE_CREDENTIAL_CUTOFF_RETENTION_MS } from "../domain/nodes/node-service.js";
import { KeyedMutex, type KeyedLock } from "../domain/shared/keyed-mutex.js";
import type { Clock } from "../shared/clock.js";
import { assert } from "../shared/errors.js";
import type { DocumentStore } from "../store/ports.js";
import { WorkloadTokenState, workloadTokenRotationGraceMs, workloadTokenTtlMs, type WorkloadTokenFacts } from "./workload-token-state.js";

export { workloadTokenRotationGraceMs, workloadTokenTtlMs };

/** Document id of the machine-credential secret in `system_secrets`. */
export const MACHINE_SECRET_ID = "machine-credential-key";
/** Lifetime of a node credential; a connected daemon gets a fresh one every half lifetime. */
export const nodeCredentialTtlMs = 24 * 60 * 60 * 1000;
/** Longest token accepted for verification (a bound before any decoding). */
export const machineTokenCharsMax = 2_048;

// A node's credential cut-off must outlive every credential issued before it.
assert(NODE_CREDENTIAL_CUTOFF_RETENTION_MS > nodeCredentialTtlMs, "node credential cut-offs must be kept longer than a credential lives");

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
  /** The refresh family (`fid`); the start id for tokens issued before families existed. */
  familyId: string;
  /** The token's generation in its family (`gen`; 0 for the token a start command carried). */
  generation: number;
  issuedAtMs: number;
  expiresAtMs: number;
}

/** What verification reads of an instance record: whether it is live, and its current start. */
export interface CredentialInstances {
  getDoc(id: string): Promise<{ state: InstanceState; startId?: string } | null>;
}

/** Whether a node accepts a credential issued at `issuedAtMs` (its certificate not revoked, the node not deleted since). */
export interface CredentialNodes {
  acceptsCredential(nodeId: string, issuedAtMs: number): Promise<boolean>;
}

/** What {@link MachineCredentials.open} needs. */
export interface MachineCredentialsDeps {
  documents: DocumentStore;
  clock: Clock;
  instances: CredentialInstances;
  nodes: CredentialNodes;
  /** Serialises the rotations and revocations of one family; cluster-wide when the controller passes a key-value lock. */
  lock?: KeyedLock;
}

type Kind = "wl" | "nd";

/** Issues and verifies workload tokens and node credentials. */
export class MachineCredentials {
  private readonly state: WorkloadTokenState;

  private constructor(
    private readonly secret: Uint8Array,
    private readonly deps: MachineCredentialsDeps,
  ) {
    this.state = new WorkloadTokenState(deps.documents, deps.clock, deps.lock ?? new KeyedMutex());
  }

  /** Loads (or creates) the shared secret. */
  static async open(deps: MachineCredentialsDeps): Promise<MachineCredentials> {
    return new MachineCredentials(await loadOrCreateSigningSecret(deps.documents, deps.clock, MACHINE_SECRET_ID), deps);
  }

  /**
   * A token for a start of the instance: `startId` is the instance record's (a fresh one when
   * absent, for records that name none), and the token begins a family of its own unless `family`
   * names the one it continues (rotation).
   */
  issueWorkloadToken(identity: WorkloadIdentity, startId?: string, family?: { familyId: string; generation: number }): IssuedCredential & { tokenId: string } {
    const nowMs = this.deps.clock.nowMs();
    const expiresAtMs = nowMs + workloadTokenTtlMs;
    const tokenId = randomBytes(12).toString("base64url");
    const claims = {
      iid: identity.instanceId,
      grp: identity.group,
      node: identity.node,
      tid: tokenId,
      sid: startId || randomBytes(12).toString("base64url"),
      fid: family?.familyId ?? randomBytes(12).toString("base64url"),
      gen: family?.generation ?? 0,
      iat: nowMs,
      exp: expiresAtMs,
    };
    return { token: this.sign("wl", claims), expiresAtMs, tokenId };
  }

  /**
   * Rotation (`/api/plugin/auth/refresh`): the next generation of the token's family, of the same
   * start; the presented token keeps working for {@link workloadTokenRotationGraceMs}, then is
   * refused. A second refresh with it inside the grace gets another token of the new generation
   * but never moves the deadline. Null when the family no longer accepts the token (revoked, or
   * rotated out meanwhile).
   */
  async rotateWorkloadToken(current: VerifiedWorkload): Promise<(IssuedCredential & { tokenId: string }) | null> {
    const generation = await this.state.rotate(factsOf(current));
    if (generation === null) return null;
    return this.issueWorkloadToken(current, current.startId, { familyId: current.familyId, generation });
  }

  /**
   * Revokes a workload token and its whole refresh family (the tokens it was refreshed from and
   * those refreshed from it) at once, on every controller. Returns its identity, or null when the
   * text is not a workload token of ours (bad signature, expired, unreadable).
   */
  async revokeWorkloadToken(token: string): Promise<(WorkloadIdentity & { tokenId: string }) | null> {
    const claims = this.open("wl", token);
    const identity = claims && identityOf(claims);
    if (!identity || !identity.tokenId) return null;
    await this.state.revokeFamily(factsOf(identity));
    return identity;
  }

  /**
   * Revokes every workload token of the instance's start `startId` (the record's current one), and
   * every token issued to the instance until now; its next start gets working ones.
   */
  revokeInstanceTokens(instanceId: string, startId: string): Promise<void> {
    return this.state.revokeStart(instanceId, startId);
  }

  issueNodeCredential(nodeId: string): IssuedCredential {
    const nowMs = this.deps.clock.nowMs();
    const expiresAtMs = nowMs + nodeCredentialTtlMs;
    return { token: this.sign("nd", { node: nodeId, iat: nowMs, exp: expiresAtMs }), expiresAtMs };
  }

  /**
   * The identity behind a workload token that is valid now: signed and unexpired, its instance's
   * record live and of the token's start, neither its family nor its start revoked, and not rotated
   * out beyond the grace. Else null.
   */
  async verifyWorkloadToken(token: string): Promise<VerifiedWorkload | null> {
    const claims = this.open("wl", token);
    const identity = claims && identityOf(claims);
    if (!identity) return null;
    const [record, accepted] = await Promise.all([this.deps.instances.getDoc(identity.instanceId), this.state.accepts(factsOf(identity))]);
    if (!record || FINISHED_STATES.has(record.state) || !accepted) return null;
    // Records written before starts had ids name none: only those accept any start.
    if (record.startId !== undefined && record.startId !== identity.startId) return null;
    return identity;
  }

  /** A principal for a valid workload token or node credential, else null (the auth service's hook). */
  async principalOf(token: string): Promise<Principal | null> {
    if (token.startsWith("nd.")) {
      const claims = this.open("nd", token);
      if (!claims || typeof claims.node !== "string") return null;
      // Credentials issued before `iat` existed count as issued a lifetime before their expiry.
      const issuedAtMs = typeof claims.iat === "number" ? claims.iat : (claims.exp as number) - nodeCredentialTtlMs;
      if (!(await this.deps.nodes.acceptsCredential(claims.node, issuedAtMs))) return null;
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
    if (typeof claims.exp !== "number" || claims.exp <= this.deps.clock.nowMs()) return null;
    return claims;
  }

  private mac(kind: Kind, payload: string): string {
    return createHmac("sha256", this.secret).update(`${kind}.${payload}`).digest("base64url");
  }
}

/** What the durable state needs of a verified token. */
function factsOf(workload: VerifiedWorkload): WorkloadTokenFacts {
  return {
    instanceId: workload.instanceId,
    startId: workload.startId,
    familyId: workload.familyId,
    generation: workload.generation,
    issuedAtMs: workload.issuedAtMs,
  };
}

/** The identity in a workload token's claims; null when a required claim is missing. */
function identityOf(claims: Record<string, unknown>): VerifiedWorkload | null {
  if (typeof claims.iid !== "string" || typeof claims.grp !== "string" || typeof claims.node !== "string" || typeof claims.exp !== "number") return null;
  const identity: VerifiedWorkload = {
    instanceId: claims.iid,
    group: claims.grp,
    node: claims.node,
    tokenId: typeof claims.tid === "string" ? claims.tid : "",
    startId: typeof claims.sid === "string" ? claims.sid : "",
    // Before families, each start command's token began its own start id: the family is that id.
    familyId: typeof claims.fid === "string" ? claims.fid : typeof claims.sid === "string" ? claims.sid : typeof claims.tid === "string" ? claims.tid : "",
    generation: typeof claims.gen === "number" && Number.isSafeInteger(claims.gen) && claims.gen >= 0 ? claims.gen : 0,
    // Tokens from before `iat` existed count as issued a lifetime before their expiry.
    issuedAtMs: typeof claims.iat === "number" ? claims.iat : claims.exp - workloadTokenTtlMs,
    expiresAtMs: claims.exp,
  };
  // A token without any id belongs to no family that could be rotated or revoked: refused.
  return identity.familyId === "" ? null : identity;
}

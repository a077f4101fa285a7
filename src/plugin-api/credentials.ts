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
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import type { Principal } from "../auth/principal.js";
import { loadOrCreateSigningSecret } from "../auth/signing-key.js";
import type { Clock } from "../shared/clock.js";
import type { DocumentStore } from "../store/ports.js";

/** Document id of the machine-credential secret in `system_secrets`. */
export const MACHINE_SECRET_ID = "machine-credential-key";
/** Lifetime of a workload token; the plugin renews it through `/api/plugin/auth/refresh`. */
export const workloadTokenTtlMs = 24 * 60 * 60 * 1000;
/** Lifetime of a node credential; a connected daemon gets a fresh one every half lifetime. */
export const nodeCredentialTtlMs = 24 * 60 * 60 * 1000;
/** Longest token accepted for verification (a bound before any decoding). */
export const machineTokenCharsMax = 2_048;

/** Permissions of a daemon's node credential. */
export const NODE_PERMISSIONS: ReadonlySet<string> = new Set(["templates.view"]);

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

/** Whether an instance still runs (or is on its way): finished instances lose their tokens. */
export type InstanceLiveness = (instanceId: string) => Promise<boolean>;

type Kind = "wl" | "nd";

/** Issues and verifies workload tokens and node credentials. */
export class MachineCredentials {
  private constructor(
    private readonly secret: Uint8Array,
    private readonly clock: Clock,
    private readonly isLive: InstanceLiveness,
  ) {}

  /** Loads (or creates) the shared secret. */
  static async open(documents: DocumentStore, clock: Clock, isLive: InstanceLiveness): Promise<MachineCredentials> {
    return new MachineCredentials(await loadOrCreateSigningSecret(documents, clock, MACHINE_SECRET_ID), clock, isLive);
  }

  issueWorkloadToken(identity: WorkloadIdentity): IssuedCredential {
    const expiresAtMs = this.clock.nowMs() + workloadTokenTtlMs;
    return { token: this.sign("wl", { iid: identity.instanceId, grp: identity.group, node: identity.node, exp: expiresAtMs }), expiresAtMs };
  }

  issueNodeCredential(nodeId: string): IssuedCredential {
    const expiresAtMs = this.clock.nowMs() + nodeCredentialTtlMs;
    return { token: this.sign("nd", { node: nodeId, exp: expiresAtMs }), expiresAtMs };
  }

  /** The identity behind a workload token that is valid now, else null. */
  async verifyWorkloadToken(token: string): Promise<WorkloadIdentity | null> {
    const claims = this.open("wl", token);
    if (!claims || typeof claims.iid !== "string" || typeof claims.grp !== "string" || typeof claims.node !== "string") return null;
    if (!(await this.isLive(claims.iid))) return null;
    return { instanceId: claims.iid, group: claims.grp, node: claims.node };
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
    return { kind: "workload", username: `instance:${workload.instanceId}`, roles: [], permissions: new Set(), instanceId: workload.instanceId };
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

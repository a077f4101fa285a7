/**
 * Joining: a daemon exchanges a single-use node join token for a node id and a client certificate
 * signed by the cluster CA. The node id is the one the daemon asks for, else the one the token is
 * bound to, else a new `node-<12 hex>` id.
 *
 * A daemon that sends its public key (`csr_public_key_pem`) keeps its private key: the certificate
 * is issued for that key, and the token's claim records the key's SHA-256, so the same daemon can
 * repeat a join whose answer it lost (same token, same key) and get the same node id again. Without
 * a public key the controller generates the key pair and returns it (older daemons).
 */
import { createHash, createPublicKey, randomBytes } from "node:crypto";
import { issueNodeCertificate, issueNodeCertificateForKey, type ClusterCa } from "../cluster/identity/ca.js";
import type { TokenConsumeOptions, TokenConsumeResult, TokenRejection } from "../domain/node-tokens/node-token-service.js";
import type { Clock } from "../shared/clock.js";
import { CONTROLLER_CERTIFICATE_NAME } from "../wire/certificate-names.js";
import type { JoinRequest, JoinResponse } from "../wire/daemon-proto.js";

/** Node ids the gateway accepts: they become certificate common names and DNS names. */
export const NODE_ID_PATTERN = /^[a-z0-9][a-z0-9.-]{0,62}$/;

/**
 * Node ids a daemon may not take: controllers' member ids (`ctl-…`) and the controllers' server
 * certificate name. Daemon and controller certificates come from one CA and differ only in their
 * common name, so a daemon named like a controller would pass for one.
 */
export function isReservedNodeId(nodeId: string): boolean {
  return nodeId.startsWith("ctl-") || nodeId === CONTROLLER_CERTIFICATE_NAME;
}

/** What joining needs from the node token service. */
export interface JoinTokens {
  consume(token: string, nodeId: string, options?: TokenConsumeOptions): Promise<TokenConsumeResult>;
}

/** Why a join was refused, with a stable code and an operator-readable message. */
export type JoinRejection = { code: TokenRejection | "INVALID_NODE_ID" | "MISSING_TOKEN" | "INVALID_PUBLIC_KEY"; message: string };

/**
 * Outcome of {@link JoinService.join}. `retry`: the token had been consumed by this same public key
 * before (an answer the daemon lost); `keySource`: who generated the node's key pair.
 */
export type JoinResult = { ok: true; response: JoinResponse; retry: boolean; keySource: "node" | "controller" } | { ok: false; rejection: JoinRejection };

/** Smallest RSA modulus accepted for a node's own key (bits). */
export const nodePublicKeyBitsMin = 2048;
/** Largest RSA modulus accepted (bits): bounds the work a peer's handshake costs. */
export const nodePublicKeyBitsMax = 8192;
/** Longest `csr_public_key_pem` accepted (characters). */
const nodePublicKeyPemCharsMax = 8192;

/** A node's public key as accepted: normalized SPKI PEM and the SHA-256 (hex) of its DER. */
export interface NodePublicKey {
  spkiPem: string;
  sha256: string;
}

/**
 * Validates a daemon's public key: an SPKI PEM (`-----BEGIN PUBLIC KEY-----`) of an RSA key
 * (rsaEncryption) of {@link nodePublicKeyBitsMin} to {@link nodePublicKeyBitsMax} bits. A refusal
 * is a message naming what is wrong.
 */
export function parseNodePublicKey(pem: string): { ok: true; key: NodePublicKey } | { ok: false; message: string } {
  const invalid = (why: string) => ({ ok: false as const, message: `Invalid public key: ${why}` });
  if (pem.length > nodePublicKeyPemCharsMax) return invalid(`longer than ${nodePublicKeyPemCharsMax} characters`);
  // createPublicKey also derives a public key from a private key PEM: only a public key is accepted.
  if (!/^\s*-----BEGIN PUBLIC KEY-----/.test(pem)) return invalid("expected a PEM-encoded SPKI public key (-----BEGIN PUBLIC KEY-----)");
  let key: ReturnType<typeof createPublicKey>;
  try {
    key = createPublicKey({ key: pem, format: "pem" });
  } catch {
    // The daemon sent a bad key: an answer for it (INVALID_ARGUMENT), not a failure of ours.
    return invalid("cannot be parsed");
  }
  if (key.asymmetricKeyType !== "rsa") return invalid(`expected an RSA key, got ${key.asymmetricKeyType ?? "unknown"}`);
  const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
  if (bits < nodePublicKeyBitsMin) return invalid(`RSA key of ${bits} bits is too small (at least ${nodePublicKeyBitsMin})`);
  if (bits > nodePublicKeyBitsMax) return invalid(`RSA key of ${bits} bits is too large (at most ${nodePublicKeyBitsMax})`);
  const der = key.export({ type: "spki", format: "der" });
  return {
    ok: true,
    key: { spkiPem: key.export({ type: "spki", format: "pem" }).toString(), sha256: createHash("sha256").update(der).digest("hex") },
  };
}

const rejectionMessages: Record<TokenRejection, string> = {
  UNKNOWN: "Invalid node join token",
  EXPIRED: "Node join token has expired",
  REVOKED: "Node join token has been revoked",
  USED: "Node join token has already been used",
  NODE_MISMATCH: "Node join token is bound to another node id",
};

export interface JoinServiceOptions {
  tokens: JoinTokens;
  ca: ClusterCa;
  clock: Clock;
  /** The node id a token is bound to (null when unbound or unknown). */
  boundNodeIdOf(token: string): Promise<string | null>;
}

/** Validates join tokens and issues node certificates. */
export class JoinService {
  constructor(private readonly options: JoinServiceOptions) {}

  /**
   * Consumes the token (or recognizes the retry of a join by the same key) and issues the node's
   * certificate; an expected refusal is a value. A bad public key is refused before the token is looked at.
   */
  async join(request: JoinRequest): Promise<JoinResult> {
    if (request.token === "") return { ok: false, rejection: { code: "MISSING_TOKEN", message: "A node join token is required" } };
    const requested = request.node_id.trim();
    if (requested !== "" && !NODE_ID_PATTERN.test(requested)) {
      return { ok: false, rejection: { code: "INVALID_NODE_ID", message: `Invalid node id: ${requested} (expected ${NODE_ID_PATTERN.source})` } };
    }
    let publicKey: NodePublicKey | null = null;
    if (request.csr_public_key_pem !== "") {
      const parsed = parseNodePublicKey(request.csr_public_key_pem);
      if (!parsed.ok) return { ok: false, rejection: { code: "INVALID_PUBLIC_KEY", message: parsed.message } };
      publicKey = parsed.key;
    }
    const nodeId = requested !== "" ? requested : ((await this.options.boundNodeIdOf(request.token)) ?? newNodeId());
    if (isReservedNodeId(nodeId)) {
      return { ok: false, rejection: { code: "INVALID_NODE_ID", message: `Invalid node id: ${nodeId} (reserved for controllers)` } };
    }
    const consumed = await this.options.tokens.consume(
      request.token,
      nodeId,
      publicKey ? { publicKeySha256: publicKey.sha256, nodeIdProposed: requested === "" } : {},
    );
    if (!consumed.ok) return { ok: false, rejection: { code: consumed.reason, message: rejectionMessages[consumed.reason] } };
    // A retry answers the node id of the claim (the one proposed now may be another new id).
    const joinedId = consumed.nodeId;
    const hosts = NODE_ID_PATTERN.test(request.hostname) ? [request.hostname] : [];
    const certificate = { nodeId: joinedId, hosts, clock: this.options.clock };
    const ca_certificate_pem = this.options.ca.certPem;
    if (publicKey) {
      const certificate_pem = issueNodeCertificateForKey(this.options.ca, publicKey.spkiPem, certificate);
      return { ok: true, retry: consumed.retry, keySource: "node", response: { node_id: joinedId, certificate_pem, ca_certificate_pem, private_key_pem: "" } };
    }
    const issued = issueNodeCertificate(this.options.ca, certificate);
    return {
      ok: true,
      retry: consumed.retry,
      keySource: "controller",
      response: { node_id: joinedId, certificate_pem: issued.certPem, ca_certificate_pem, private_key_pem: issued.keyPem },
    };
  }
}

/** A new node id: `node-` and 12 random hex digits. */
export function newNodeId(): string {
  return `node-${randomBytes(6).toString("hex")}`;
}

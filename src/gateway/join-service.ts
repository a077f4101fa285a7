/**
 * Joining: a daemon exchanges a single-use node join token for a node id and a client certificate
 * signed by the cluster CA. The node id is the one the daemon asks for, else the one the token is
 * bound to, else a new `node-<12 hex>` id.
 */
import { CONTROLLER_CERTIFICATE_NAME } from "./cluster-ca-store.js";
import { randomBytes } from "node:crypto";
import { issueNodeCertificate, type ClusterCa } from "../cluster/ca.js";
import type { TokenConsumeResult, TokenRejection } from "../domain/node-tokens/node-token-service.js";
import type { Clock } from "../shared/clock.js";
import type { JoinRequest, JoinResponse } from "./daemon-proto.js";

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
  consume(token: string, nodeId: string): Promise<TokenConsumeResult>;
}

/** Why a join was refused, with a stable code and an operator-readable message. */
export type JoinRejection = { code: TokenRejection | "INVALID_NODE_ID" | "MISSING_TOKEN"; message: string };

/** Outcome of {@link JoinService.join}. */
export type JoinResult = { ok: true; response: JoinResponse } | { ok: false; rejection: JoinRejection };

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

  /** Consumes the token and issues the node's certificate; an expected refusal is a value. */
  async join(request: JoinRequest): Promise<JoinResult> {
    if (request.token === "") return { ok: false, rejection: { code: "MISSING_TOKEN", message: "A node join token is required" } };
    const requested = request.node_id.trim();
    if (requested !== "" && !NODE_ID_PATTERN.test(requested)) {
      return { ok: false, rejection: { code: "INVALID_NODE_ID", message: `Invalid node id: ${requested} (expected ${NODE_ID_PATTERN.source})` } };
    }
    const nodeId = requested !== "" ? requested : ((await this.options.boundNodeIdOf(request.token)) ?? newNodeId());
    if (isReservedNodeId(nodeId)) {
      return { ok: false, rejection: { code: "INVALID_NODE_ID", message: `Invalid node id: ${nodeId} (reserved for controllers)` } };
    }
    const consumed = await this.options.tokens.consume(request.token, nodeId);
    if (!consumed.ok) return { ok: false, rejection: { code: consumed.reason, message: rejectionMessages[consumed.reason] } };
    const hosts = NODE_ID_PATTERN.test(request.hostname) ? [request.hostname] : [];
    const issued = issueNodeCertificate(this.options.ca, { nodeId, hosts, clock: this.options.clock });
    return {
      ok: true,
      response: { node_id: nodeId, certificate_pem: issued.certPem, ca_certificate_pem: this.options.ca.certPem, private_key_pem: issued.keyPem },
    };
  }
}

/** A new node id: `node-` and 12 random hex digits. */
export function newNodeId(): string {
  return `node-${randomBytes(6).toString("hex")}`;
}

/**
 * The node-session registry in the shared key-value store: which controller holds each node's
 * daemon stream, so that a controller without the session forwards commands to the one with it.
 *
 * `cloud:v1:session:node:<nodeId>` holds `{"controllerId":…,"sessionId":…}` with an expiry that
 * the holding controller extends on every heartbeat. The newest session wins: a daemon that
 * reconnects (to this or another controller) overwrites the entry, and the previous holder's
 * renewals and unregistration then find someone else's session and leave it alone. A controller
 * that dies stops renewing, and its entries expire.
 */
import { assert } from "../shared/errors.js";
import type { KvStore } from "../store/ports.js";
import { nodeSessionKey } from "./keys.js";

/** Expiry of an entry unless renewed: six daemon heartbeat intervals of 5 s, the disconnect bound. */
export const SESSION_TTL_MS_DEFAULT = 30_000;

/** Where one node's daemon stream is held. */
export interface NodeSession {
  readonly nodeId: string;
  readonly controllerId: string;
  readonly sessionId: string;
}

/** Options of {@link NodeSessionRegistry}. */
export interface NodeSessionRegistryOptions {
  kv: KvStore;
  /** Expiry of an entry; renew well within it (every heartbeat). */
  sessionTtlMs?: number;
}

function encode(controllerId: string, sessionId: string): string {
  return JSON.stringify({ controllerId, sessionId });
}

function decode(nodeId: string, value: string): NodeSession | null {
  try {
    const parsed: unknown = JSON.parse(value);
    if (typeof parsed !== "object" || parsed === null) return null;
    const { controllerId, sessionId } = parsed as Record<string, unknown>;
    if (typeof controllerId !== "string" || typeof sessionId !== "string") return null;
    return { nodeId, controllerId, sessionId };
  } catch {
    // An unreadable entry names no holder: no session, the same answer as an entry of the wrong shape.
    return null;
  }
}

/** The registry of node sessions; every controller shares one through the key-value store. */
export class NodeSessionRegistry {
  private readonly kv: KvStore;
  private readonly sessionTtlMs: number;

  constructor(options: NodeSessionRegistryOptions) {
    this.kv = options.kv;
    this.sessionTtlMs = options.sessionTtlMs ?? SESSION_TTL_MS_DEFAULT;
    assert(Number.isSafeInteger(this.sessionTtlMs) && this.sessionTtlMs > 0, "sessionTtlMs must be a positive integer");
  }

  /** Records that `controllerId` holds the node's stream as `sessionId`, replacing any entry. */
  async register(nodeId: string, controllerId: string, sessionId: string): Promise<void> {
    await this.kv.set(nodeSessionKey(nodeId), encode(controllerId, sessionId), { ttlMs: this.sessionTtlMs });
  }

  /**
   * Heartbeat: extends the entry while it still names this session, and writes it again when it
   * expired meanwhile. False when another session holds the node (this one was replaced).
   */
  async renew(nodeId: string, controllerId: string, sessionId: string): Promise<boolean> {
    const key = nodeSessionKey(nodeId);
    const value = encode(controllerId, sessionId);
    if (await this.kv.compareAndSet(key, value, value, { ttlMs: this.sessionTtlMs })) return true;
    return this.kv.setIfAbsent(key, value, { ttlMs: this.sessionTtlMs });
  }

  /** The session holding the node, or null when none is registered (or the entry is unreadable). */
  async lookup(nodeId: string): Promise<NodeSession | null> {
    const value = await this.kv.get(nodeSessionKey(nodeId));
    return value === null ? null : decode(nodeId, value);
  }

  /** Removes the entry only while it still names `sessionId`; true when removed. */
  async unregister(nodeId: string, sessionId: string): Promise<boolean> {
    const key = nodeSessionKey(nodeId);
    const value = await this.kv.get(key);
    if (value === null || decode(nodeId, value)?.sessionId !== sessionId) return false;
    return this.kv.compareAndDelete(key, value);
  }
}

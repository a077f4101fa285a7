/**
 * The node-session registry in the shared key-value store: which controller holds each node's
 * daemon stream, so that a controller without the session forwards commands to the one with it.
 *
 * `cloud:v1:session:node:<nodeId>` holds `{"controllerId":…,"sessionId":…,"epoch":…}` with an
 * expiry that the holding controller extends on every heartbeat. The newest session wins: a daemon
 * that reconnects (to this or another controller) gets the node's next session epoch and replaces
 * the entry, and the previous holder's registrations, renewals and unregistration then find a
 * newer session and leave it alone (a controller frozen past its daemon's reconnect must not write
 * its old session back when it resumes). A controller that dies stops renewing, and its entries
 * expire.
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
  /** The node's session epoch (0 in an entry written without one). */
  readonly epoch: number;
}

/** Options of {@link NodeSessionRegistry}. */
export interface NodeSessionRegistryOptions {
  kv: KvStore;
  /** Expiry of an entry; renew well within it (every heartbeat). */
  sessionTtlMs?: number;
}

function encode(controllerId: string, sessionId: string, epoch: number): string {
  return JSON.stringify({ controllerId, sessionId, epoch });
}

/** Attempts of a registration that lost a compare-and-set race before it gives up. */
const registerAttemptsMax = 8;

function decode(nodeId: string, value: string): NodeSession | null {
  try {
    const parsed: unknown = JSON.parse(value);
    if (typeof parsed !== "object" || parsed === null) return null;
    const { controllerId, sessionId, epoch } = parsed as Record<string, unknown>;
    if (typeof controllerId !== "string" || typeof sessionId !== "string") return null;
    return { nodeId, controllerId, sessionId, epoch: typeof epoch === "number" ? epoch : 0 };
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

  /**
   * Records (or renews) that `controllerId` holds the node's stream as `sessionId` with session
   * epoch `epoch`: replaces an entry of an older epoch (or of this very session), never one of a
   * newer epoch. False when a newer session holds the node.
   */
  async register(nodeId: string, controllerId: string, sessionId: string, epoch: number): Promise<boolean> {
    const key = nodeSessionKey(nodeId);
    const value = encode(controllerId, sessionId, epoch);
    for (let attempt = 0; attempt < registerAttemptsMax; attempt++) {
      const current = await this.kv.get(key);
      if (current === null) {
        if (await this.kv.setIfAbsent(key, value, { ttlMs: this.sessionTtlMs })) return true;
        continue;
      }
      const held = decode(nodeId, current);
      if (held && held.sessionId !== sessionId && held.epoch > epoch) return false;
      if (await this.kv.compareAndSet(key, current, value, { ttlMs: this.sessionTtlMs })) return true;
    }
    return false;
  }

  /**
   * Heartbeat: extends the entry while it still names this session, and writes it again when it
   * expired meanwhile. False when another session holds the node (this one was replaced).
   */
  async renew(nodeId: string, controllerId: string, sessionId: string, epoch: number): Promise<boolean> {
    const key = nodeSessionKey(nodeId);
    const value = encode(controllerId, sessionId, epoch);
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

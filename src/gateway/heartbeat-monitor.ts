/**
 * The liveness of one daemon session as the controller's pings see it: how many went unanswered,
 * whether the node is stale, and when the session must end. Pure: the session owns the timer, the
 * stream and the events; this decides.
 */

/** The bounds the monitor applies, in unanswered pings. */
export interface HeartbeatLimits {
  staleAfterMissedPongs: number;
  disconnectAfterMissedPongs: number;
}

/** What one heartbeat tick asks of the session. */
export type HeartbeatTick =
  /** Too many pings went unanswered: end the session. */
  | { kind: "disconnect"; missedPongs: number }
  /**
   * Send ping `sequence`. `becameStale` is set on the tick that crosses the stale bound (once per
   * episode), with the unanswered count and the last sign of life at that moment.
   */
  | { kind: "ping"; sequence: number; becameStale: { missedPongs: number; lastHeartbeatAtMs: number } | null };

/**
 * Counts unanswered pings of one session. {@link tick} runs once per heartbeat interval and says
 * whether to ping or to disconnect; {@link answered} records any message from the daemon (a busy
 * daemon whose pongs queue behind its reports is alive) and says whether a stale node resumed.
 */
export class HeartbeatMonitor {
  private pingSequence = 0;
  private missed = 0;
  private isStale = false;
  private lastAtMs: number;

  constructor(
    private readonly limits: HeartbeatLimits,
    startedAtMs: number,
  ) {
    this.lastAtMs = startedAtMs;
  }

  get stale(): boolean {
    return this.isStale;
  }

  get missedPongs(): number {
    return this.missed;
  }

  /** When the daemon was last heard from (or the session started). */
  get lastHeartbeatAtMs(): number {
    return this.lastAtMs;
  }

  tick(): HeartbeatTick {
    if (this.missed >= this.limits.disconnectAfterMissedPongs) return { kind: "disconnect", missedPongs: this.missed };
    let becameStale: { missedPongs: number; lastHeartbeatAtMs: number } | null = null;
    if (this.missed >= this.limits.staleAfterMissedPongs && !this.isStale) {
      this.isStale = true;
      becameStale = { missedPongs: this.missed, lastHeartbeatAtMs: this.lastAtMs };
    }
    this.pingSequence += 1;
    this.missed += 1;
    return { kind: "ping", sequence: this.pingSequence, becameStale };
  }

  /** The daemon was heard from at `nowMs`; true when this ends a stale episode. */
  answered(nowMs: number): boolean {
    this.missed = 0;
    this.lastAtMs = nowMs;
    if (!this.isStale) return false;
    this.isStale = false;
    return true;
  }
}

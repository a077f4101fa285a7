/**
 * Singleton leases over the cluster state: a job that must run on one controller at a time (the
 * audit pruner, the deployment reconciler) runs under a lease granted through the Raft quorum.
 * Expiry is decided with the leader's clock; the fencing token is the log index of the grant.
 */
import type { Logger } from "../../logs/types.js";
import { ApiError } from "../../shared/errors.js";
import type { AppliedCommand, UnstampedCommand } from "./cluster-commands.js";
import type { LeaseRecord } from "./cluster-state-machine.js";

/** A lease held while a singleton job runs. */
export interface HeldLease {
  readonly name: string;
  readonly fencingToken: number;
  /** Aborted when a renewal is refused or fails: the job must stop acting for the cluster. */
  readonly signal: AbortSignal;
  /**
   * Renews the lease through the Raft quorum now; rejects (and aborts `signal`) when it is no
   * longer this controller's with this token. A job fences a write with it: once it resolves, no
   * other controller can be granted the lease for a TTL (the leader's clock decides expiry).
   */
  confirm(): Promise<void>;
}

/** What the leases need of the cluster service. */
export interface LeaseCommitter {
  readonly nodeId: string;
  commit<T>(command: UnstampedCommand, timeoutMs?: number): Promise<AppliedCommand<T>>;
}

/** The leases this controller holds and the jobs running under them. */
export class SingletonLeases {
  private readonly held = new Map<string, number>();

  constructor(
    private readonly cluster: LeaseCommitter,
    private readonly log: Logger,
  ) {}

  /**
   * Runs `fn` while this controller holds the lease `name` (renewed every third of `ttlMs` while
   * `fn` runs). Returns false without running `fn` when another controller holds it or Raft cannot
   * commit; the caller retries on its next tick. The lease is kept after `fn` (the next run renews
   * it, so the job stays on one controller) and released by {@link releaseAll} at stop.
   */
  async runUnderLease(name: string, ttlMs: number, fn: (lease: HeldLease) => Promise<void> | void): Promise<boolean> {
    const holder = this.cluster.nodeId;
    let granted: LeaseRecord;
    try {
      const result = await this.cluster.commit<LeaseRecord>({ op: "lease.acquire", name, holder, ttlMs });
      if (!result.ok) return false;
      granted = result.value;
    } catch (err) {
      // An expected refusal (not ready, no quorum in time): not held this time, the next tick asks again.
      if (err instanceof ApiError) return false;
      throw err;
    }
    this.held.set(name, granted.fencingToken);
    const abort = new AbortController();
    const renewEveryMs = Math.max(1, Math.floor(ttlMs / 3));
    const renew = (): Promise<boolean> =>
      this.cluster.commit<LeaseRecord>({ op: "lease.renew", name, holder, fencingToken: granted.fencingToken, ttlMs }).then(
        (result) => {
          if (!result.ok) this.lose(name, abort, result.message);
          return result.ok;
        },
        (err: unknown) => (this.lose(name, abort, err instanceof Error ? err.message : String(err)), false),
      );
    let renewing: Promise<unknown> = Promise.resolve();
    const timer = setInterval(() => {
      renewing = renew();
    }, renewEveryMs);
    timer.unref();
    const confirm = async (): Promise<void> => {
      if (abort.signal.aborted || !(await renew())) throw new Error(`Singleton lease ${name} (fencing token ${granted.fencingToken}) is no longer held here`);
    };
    try {
      await fn({ name, fencingToken: granted.fencingToken, signal: abort.signal, confirm });
    } finally {
      clearInterval(timer);
      await renewing;
    }
    return true;
  }

  /** Releases every held lease (best effort, each bounded by `timeoutMs`), so a survivor can take it at once. */
  async releaseAll(timeoutMs: number): Promise<void> {
    const holder = this.cluster.nodeId;
    // A release that fails costs only time: the lease expires after its TTL and a survivor takes it then.
    await Promise.all(
      [...this.held].map(([name, fencingToken]) => this.cluster.commit({ op: "lease.release", name, holder, fencingToken }, timeoutMs).catch(() => undefined)),
    );
    this.held.clear();
  }

  private lose(name: string, abort: AbortController, why: string): void {
    if (this.held.delete(name)) this.log.warn(`Lost singleton lease ${name}: ${why}`);
    abort.abort(new Error(`lease ${name} lost: ${why}`));
  }
}

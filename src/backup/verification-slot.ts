/**
 * One bundle verification at a time on a controller. Verifying reads, parses and hashes the whole
 * bundle on the controller's event loop (up to 64 GiB unpacked); several at once would each take
 * their share of the loop that also runs Raft, leases and every request. A verification asked
 * through the API while one runs is refused at once ({@link tryAcquire}: the route answers 503
 * VERIFY_BUSY with Retry-After), so readers cannot pile them up; the verification a restore or an
 * upload needs waits its turn ({@link acquire}), and those are one at a time already (BACKUP_BUSY),
 * so at most one waits.
 */
import { assert } from "../shared/errors.js";

/** Verifications that may wait for the slot: an upload or a restore (one at a time), with room to spare. */
const WAITERS_MAX = 4;

/** See the module comment. */
export class VerificationSlot {
  private held = false;
  private readonly waiters: (() => void)[] = [];

  /** Takes the slot now and returns its release, or returns null when it is taken. */
  tryAcquire(): (() => void) | null {
    if (this.held) return null;
    this.held = true;
    return this.releaser();
  }

  /** Takes the slot, waiting for it when it is taken; returns its release. */
  async acquire(): Promise<() => void> {
    const now = this.tryAcquire();
    if (now) return now;
    assert(this.waiters.length < WAITERS_MAX, "verifications waiting for the slot are bounded by the one-at-a-time backup operations");
    await new Promise<void>((resolve) => this.waiters.push(resolve));
    return this.releaser();
  }

  /** True while a verification runs. */
  busy(): boolean {
    return this.held;
  }

  private releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiters.shift();
      // The slot passes straight to the next waiter: nobody can take it in between.
      if (next) next();
      else this.held = false;
    };
  }
}

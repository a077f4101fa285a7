/**
 * Leaked loaders (spec document 3's "leaked class loaders", docs/decisions/modules.md): a module's
 * worker thread is asked to end after unload and ends by itself unless the module left something
 * running (a timer, a socket, a listener). Each let-go worker is tracked until its thread exits;
 * every poll it survives counts one leak detection. `forceCleanup` terminates them. At most
 * {@link TRACKED_WORKERS_MAX} are kept: past it the oldest is terminated.
 */
import type { Clock, Timer } from "../../shared/clock.js";
import type { Logger } from "../../logs/types.js";
import type { ModuleWorker } from "./module-worker.js";

/** Workers awaiting their end kept at once; an older one is terminated to make room. */
export const TRACKED_WORKERS_MAX = 32;
/** How often survivors are counted. */
export const LEAK_POLL_INTERVAL_MS = 10_000;

/** One tracked worker, as the leak report shows it. */
export interface TrackedLoader {
  moduleId: string;
  version: string;
  threadId: number;
  retiredAt: string;
  /** Polls it survived: 0 while pending, above 0 once leaked. */
  survivedPolls: number;
  status: "pending" | "leaked";
}

/** Counters of the `cloud_module_classloader_*` metrics. */
export interface LoaderCounters {
  tracked: number;
  collected: number;
  leaked: number;
}

interface Entry {
  view: TrackedLoader;
  worker: ModuleWorker;
}

/** See the module comment. */
export class LeakTracker {
  private readonly entries = new Map<ModuleWorker, Entry>();
  private readonly counters: LoaderCounters = { tracked: 0, collected: 0, leaked: 0 };
  private timer: Timer | null = null;

  constructor(
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly pollIntervalMs = LEAK_POLL_INTERVAL_MS,
    /** Called after each poll (the cluster-wide report is written then). */
    private readonly afterPoll: () => void = () => {},
  ) {}

  start(): void {
    this.timer ??= this.clock.setInterval(() => this.poll(), this.pollIntervalMs, { unref: true });
  }

  /** Tracks a worker that was asked to end. */
  track(moduleId: string, version: string, worker: ModuleWorker): void {
    this.counters.tracked++;
    const entry: Entry = {
      worker,
      view: { moduleId, version, threadId: worker.threadId, retiredAt: new Date(this.clock.nowMs()).toISOString(), survivedPolls: 0, status: "pending" },
    };
    this.entries.set(worker, entry);
    void worker.exited.then(() => {
      if (this.entries.delete(worker)) this.counters.collected++;
    });
    while (this.entries.size > TRACKED_WORKERS_MAX) {
      const [oldest] = this.entries.values();
      this.logger.warn(
        `More than ${TRACKED_WORKERS_MAX} module workers await their end; terminating the oldest (${oldest.view.moduleId} ${oldest.view.version})`,
      );
      this.entries.delete(oldest.worker);
      this.counters.collected++;
      void oldest.worker.terminate();
    }
  }

  /** Counts one leak for every worker still running since the last poll. */
  poll(): void {
    for (const entry of this.entries.values()) {
      if (!entry.worker.stats().alive) continue;
      entry.view.survivedPolls++;
      entry.view.status = "leaked";
      this.counters.leaked++;
      if (entry.view.survivedPolls === 1)
        this.logger.warn(
          `Module ${entry.view.moduleId} ${entry.view.version} left its worker running after unload (thread ${entry.view.threadId}); see the leak report`,
        );
    }
    this.afterPoll();
  }

  /** The workers awaiting their end. */
  report(): TrackedLoader[] {
    return [...this.entries.values()].map((entry) => ({ ...entry.view }));
  }

  counts(): LoaderCounters & { pending: number } {
    return { ...this.counters, pending: this.entries.size };
  }

  /** Terminates every tracked worker; how many. */
  async forceCleanup(): Promise<number> {
    const entries = [...this.entries.values()];
    for (const entry of entries) {
      this.entries.delete(entry.worker);
      this.counters.collected++;
    }
    await Promise.all(entries.map((entry) => entry.worker.terminate()));
    return entries.length;
  }

  async stop(): Promise<void> {
    this.timer?.cancel();
    this.timer = null;
    await this.forceCleanup();
  }
}

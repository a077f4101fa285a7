/**
 * Advisory soft quotas of modules (spec document 2: breaches "are advisory and only counted";
 * values decided in docs/decisions/modules.md): every `intervalMs` each module's worker is sampled,
 * its event-loop utilization over the interval against `cpuFraction` (the share of one core its
 * thread was busy) and its heap after the last heartbeat against `heapFraction` of its heap limit.
 * A breach is counted per module and resource and makes the module `degraded` for `degradedForMs`.
 * The third resource of the metric's label, threads, is not measured: a worker cannot see the
 * threads its module starts.
 */
import type { EventLoopUtilization } from "node:perf_hooks";
import type { Clock, Timer } from "../../shared/clock.js";
import type { ModuleManager } from "./module-manager.js";
import type { ModuleWorker } from "./module-worker.js";

export interface SoftQuotas {
  /** Busy share of its thread over one interval (0..1). */
  cpuFraction: number;
  /** Used share of its heap limit (0..1). */
  heapFraction: number;
}

/** A module's health as `cloud_module_health{status}` counts it (ACTIVE modules only). */
export type ModuleHealth = "healthy" | "degraded";

/** See the module comment. */
export class QuotaMonitor {
  private timer: Timer | null = null;
  private readonly samples = new WeakMap<ModuleWorker, EventLoopUtilization>();
  private readonly lastBreachMs = new Map<string, number>();

  constructor(
    private readonly manager: ModuleManager,
    private readonly clock: Clock,
    private readonly quotas: SoftQuotas,
    private readonly onBreach: (moduleId: string, resource: "cpu" | "allocation") => void,
    private readonly intervalMs = 10_000,
    private readonly degradedForMs = 60_000,
  ) {}

  start(): void {
    this.timer ??= this.clock.setInterval(() => this.sample(), this.intervalMs, { unref: true });
  }

  stop(): void {
    this.timer?.cancel();
    this.timer = null;
  }

  /** Samples every worker once. */
  sample(): void {
    for (const runtime of this.manager.list()) {
      const worker = runtime.worker;
      if (!worker) continue;
      const previous = this.samples.get(worker);
      const now = worker.utilization();
      this.samples.set(worker, now);
      if (previous && worker.utilization(previous).utilization > this.quotas.cpuFraction) this.breach(runtime.id, "cpu");
      const { heapUsedBytes, heapLimitBytes } = worker.stats();
      if (heapLimitBytes > 0 && heapUsedBytes / heapLimitBytes > this.quotas.heapFraction) this.breach(runtime.id, "allocation");
    }
  }

  /** healthy, or degraded: a quota breached lately, or a heartbeat older than two intervals. */
  health(moduleId: string): ModuleHealth {
    const breach = this.lastBreachMs.get(moduleId);
    if (breach !== undefined && this.clock.nowMs() - breach < this.degradedForMs) return "degraded";
    const worker = this.manager.get(moduleId)?.worker;
    if (worker && worker.stats().sinceBeatMs > 2 * this.intervalMs) return "degraded";
    return "healthy";
  }

  private breach(moduleId: string, resource: "cpu" | "allocation"): void {
    this.lastBreachMs.set(moduleId, this.clock.nowMs());
    this.onBreach(moduleId, resource);
  }
}

/**
 * The platform-module metrics of spec document 2's list, registered on the metrics service's own
 * registry and read at scrape time from this controller's modules: `cloud_platform_modules_*`,
 * `cloud_platform_extension*`, `cloud_module_health{status}` (ACTIVE modules per health: healthy, or
 * degraded while a soft quota was breached in the last minute or the heartbeat is late),
 * `cloud_module_quota_exceeded_total{module,resource}`, `cloud_capabilities_*` and
 * `cloud_module_classloader_*` (workers awaiting their end after unload). Disabled metrics register
 * nothing.
 */
import { Counter, Gauge } from "prom-client";
import type { MetricsService } from "../metrics/metrics.js";
import type { LoaderCounters } from "./host/leak-tracker.js";
import type { ResolutionPass } from "./host/module-manager.js";
import { MODULE_STATES, type ModuleState } from "./host/module-states.js";
import type { ModuleHealth } from "./host/quota-monitor.js";

/** What the metrics read from the modules at scrape time. */
export interface ModuleMetricSources {
  modules(): readonly { state: ModuleState; health: ModuleHealth | null; extensions: number; variants: number }[];
  loaders(): LoaderCounters & { pending: number };
}

/** What the modules record as it happens. */
export interface ModuleMetrics {
  quotaExceeded(moduleId: string, resource: "cpu" | "allocation" | "threads"): void;
  resolution(pass: ResolutionPass): void;
}

const noop: ModuleMetrics = { quotaExceeded: () => {}, resolution: () => {} };

/** Registers the metrics; `sources` is read at every scrape. */
export function createModuleMetrics(metrics: Pick<MetricsService, "enabled" | "registry">, sources: () => ModuleMetricSources | null): ModuleMetrics {
  if (!metrics.enabled) return noop;
  const registers = [metrics.registry];
  const modules = () => sources()?.modules() ?? [];
  new Gauge({
    name: "cloud_platform_modules_total",
    help: "Platform modules known to this controller",
    registers,
    collect() {
      this.set(modules().length);
    },
  });
  new Gauge({
    name: "cloud_platform_modules_state",
    help: "Platform modules per lifecycle state",
    labelNames: ["state"] as const,
    registers,
    collect() {
      const all = modules();
      for (const state of MODULE_STATES) this.set({ state }, all.filter((m) => m.state === state).length);
    },
  });
  new Gauge({
    name: "cloud_platform_extensions_total",
    help: "Workload extensions declared by modules that are not FAILED",
    registers,
    collect() {
      this.set(modules().reduce((sum, m) => sum + (m.state === "FAILED" ? 0 : m.extensions), 0));
    },
  });
  new Gauge({
    name: "cloud_platform_extension_variants_total",
    help: "Extension variants declared by modules that are not FAILED",
    registers,
    collect() {
      this.set(modules().reduce((sum, m) => sum + (m.state === "FAILED" ? 0 : m.variants), 0));
    },
  });
  new Gauge({
    name: "cloud_module_health",
    help: "ACTIVE modules per health status: healthy, or degraded (a soft quota breached in the last minute, or a late heartbeat)",
    labelNames: ["status"] as const,
    registers,
    collect() {
      const active = modules().filter((m) => m.state === "ACTIVE");
      for (const status of ["healthy", "degraded"] as const) this.set({ status }, active.filter((m) => m.health === status).length);
    },
  });
  const quotaExceeded = new Counter({
    name: "cloud_module_quota_exceeded_total",
    help: "Advisory soft-quota breaches per module and resource (cpu, allocation, threads)",
    labelNames: ["module", "resource"] as const,
    registers,
  });
  const resolutions = new Counter({ name: "cloud_capabilities_resolutions_total", help: "Capability resolution passes", registers });
  const rebindings = new Counter({
    name: "cloud_capabilities_rebindings_total",
    help: "Requirements bound to another provider (or to none) by a pass",
    registers,
  });
  const unresolved = new Gauge({
    name: "cloud_capabilities_unresolved_requirements",
    help: "Requirements without a provider in range after the last pass",
    registers,
  });
  const latency = new Gauge({
    name: "cloud_capabilities_last_resolution_latency_millis",
    help: "Duration of the last resolution pass, in milliseconds",
    registers,
  });
  const deprecated = new Counter({
    name: "cloud_capabilities_deprecated_resolutions_total",
    help: "Requirements newly bound to a deprecated provider",
    registers,
  });
  new Gauge({
    name: "cloud_module_classloader_pending",
    help: "Module workers asked to end after unload that have not ended yet",
    registers,
    collect() {
      this.set(sources()?.loaders().pending ?? 0);
    },
  });
  const loaderCounter = (name: string, help: string, read: (c: LoaderCounters) => number) =>
    new Counter({
      name,
      help,
      registers,
      collect() {
        const counts = sources()?.loaders();
        if (!counts) return;
        this.reset();
        this.inc(read(counts));
      },
    });
  loaderCounter("cloud_module_classloader_tracked_total", "Module workers tracked after unload", (c) => c.tracked);
  loaderCounter("cloud_module_classloader_collected_total", "Tracked module workers that ended", (c) => c.collected);
  loaderCounter("cloud_module_classloader_leaked_total", "Leak detections: one per poll a tracked worker survives", (c) => c.leaked);
  return {
    quotaExceeded: (module, resource) => quotaExceeded.inc({ module, resource }),
    resolution: (pass) => {
      resolutions.inc();
      if (pass.rebindings > 0) rebindings.inc(pass.rebindings);
      if (pass.deprecatedResolutions > 0) deprecated.inc(pass.deprecatedResolutions);
      unresolved.set(pass.unresolved);
      latency.set(pass.latencyMs);
    },
  };
}

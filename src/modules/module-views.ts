/**
 * What the management routes answer: the module list (spec: enabled flag, frontend presence,
 * platform plugin count; the rest decided in docs/decisions/modules.md), the capability providers
 * and requirements, built from the records (the cluster's truth) and this controller's runtimes.
 */
import type { Binding } from "./host/capability-resolver.js";
import type { ModuleRuntime } from "./host/module-runtime.js";
import type { ModuleHealth } from "./host/quota-monitor.js";
import type { ModuleRecord } from "./module-records.js";

/** One module of `GET /api/v1/modules`. */
export interface ModuleView {
  id: string;
  version: string;
  /** Its lifecycle state on this controller; NOT_LOADED when it does not run here (yet). */
  state: string;
  /** Whether the module runs on controllers (its hosts include controller). There is no enable or disable route. */
  enabled: boolean;
  hasFrontend: boolean;
  frontend: { entry: string; contentHash: string } | null;
  /** Extension variants it streams to servers (platform plugins). */
  platformPluginCount: number;
  hosts: string[];
  /** healthy or degraded while ACTIVE, else null. */
  health: ModuleHealth | null;
  failure: { cause: string; reason: string; at: string } | null;
  routes: { method: string; template: string }[];
  signed: boolean;
  signedBy: string | null;
  source: string;
  installedAt: string;
  updatedAt: string;
  installedBy: string;
  generation: number;
  capabilities: { provides: { id: string; version: string; deprecated: boolean }[]; requires: { id: string; versionRange: string }[] };
  storage: { mongo: boolean; redis: boolean; limits: { mongoDocuments: number; redisKeys: number } };
}

export function moduleView(record: ModuleRecord, runtime: ModuleRuntime | undefined, health: (id: string) => ModuleHealth): ModuleView {
  const { manifest } = record;
  return {
    id: record._id,
    version: record.version,
    state: runtime ? runtime.state : "NOT_LOADED",
    enabled: manifest.hosts.includes("controller"),
    hasFrontend: record.frontend !== null,
    frontend: record.frontend && { entry: record.frontend.entry, contentHash: record.frontend.contentHash },
    platformPluginCount: manifest.extensions.reduce((sum, extension) => sum + extension.variants.length, 0),
    hosts: manifest.hosts,
    health: runtime?.state === "ACTIVE" ? health(record._id) : null,
    failure: runtime?.failure ? { cause: runtime.failure.cause, reason: runtime.failure.reason, at: new Date(runtime.failure.atMs).toISOString() } : null,
    routes: (runtime?.routes ?? []).map((route) => ({ method: route.method, template: route.template.text })),
    signed: record.signature !== null,
    signedBy: record.signedBy,
    source: record.source,
    installedAt: record.installedAt,
    updatedAt: record.updatedAt,
    installedBy: record.installedBy,
    generation: record.generation,
    capabilities: {
      provides: manifest.capabilities.provides.map((p) => ({ id: p.id, version: p.version, deprecated: p.deprecatedSince !== null })),
      requires: manifest.capabilities.requires.map((r) => ({ id: r.id, versionRange: r.versionRange })),
    },
    storage: manifest.storage,
  };
}

/** `GET /api/v1/modules/platform/capabilities`. */
export interface CapabilitiesView {
  providers: {
    capabilityId: string;
    version: string;
    moduleId: string;
    deprecatedSince: string | null;
    removedIn: string | null;
    deprecated: boolean;
    active: boolean;
  }[];
  requirements: { moduleId: string; capabilityId: string; versionRange: string; resolved: boolean; provider: Binding | null }[];
}

export function capabilitiesView(runtimes: readonly ModuleRuntime[], bindings: ReadonlyMap<string, Binding | null>): CapabilitiesView {
  const providers: CapabilitiesView["providers"] = [];
  const requirements: CapabilitiesView["requirements"] = [];
  for (const runtime of runtimes) {
    for (const offer of runtime.module.manifest.capabilities.provides)
      providers.push({
        capabilityId: offer.id,
        version: offer.version,
        moduleId: runtime.id,
        deprecatedSince: offer.deprecatedSince,
        removedIn: offer.removedIn,
        deprecated: offer.deprecatedSince !== null,
        active: runtime.state === "ACTIVE" && runtime.provided.includes(offer.id),
      });
    for (const requirement of runtime.module.manifest.capabilities.requires) {
      const provider = bindings.get(`${runtime.id} ${requirement.id}`) ?? null;
      requirements.push({ moduleId: runtime.id, capabilityId: requirement.id, versionRange: requirement.versionRange, resolved: provider !== null, provider });
    }
  }
  providers.sort((a, b) => a.capabilityId.localeCompare(b.capabilityId) || a.moduleId.localeCompare(b.moduleId));
  return { providers, requirements };
}

/**
 * One capability resolution pass (docs/decisions/modules.md, "Capabilities"), pure: every
 * requirement of every loaded module is bound to the provider of that capability id with the
 * highest version in the requirement's semver range among the ACTIVE modules (ties: the lower module
 * id), a module never providing for itself. A deprecated provider (deprecatedSince set) is bound
 * like any other and flagged. A pass reports what changed since the last: new bindings, rebindings
 * and losses.
 */
import semver from "semver";

/** A capability a module offers. */
export interface OfferedCapability {
  moduleId: string;
  capabilityId: string;
  version: string;
  deprecatedSince: string | null;
  removedIn: string | null;
}

/** A module's requirement. */
export interface Requirement {
  moduleId: string;
  capabilityId: string;
  versionRange: string;
}

/** The provider a requirement is bound to. */
export interface Binding {
  moduleId: string;
  version: string;
  deprecated: boolean;
}

/** `<moduleId> <capabilityId>`: a requirement's key. */
export const requirementKey = (moduleId: string, capabilityId: string): string => `${moduleId} ${capabilityId}`;

/** The bindings of every requirement (null when unresolved). */
export function resolveCapabilities(offers: readonly OfferedCapability[], requirements: readonly Requirement[]): Map<string, Binding | null> {
  const bindings = new Map<string, Binding | null>();
  for (const requirement of requirements) {
    let best: OfferedCapability | null = null;
    for (const offer of offers) {
      if (offer.capabilityId !== requirement.capabilityId || offer.moduleId === requirement.moduleId) continue;
      if (!semver.satisfies(offer.version, requirement.versionRange, { includePrerelease: true })) continue;
      if (!best || semver.gt(offer.version, best.version) || (semver.eq(offer.version, best.version) && offer.moduleId < best.moduleId)) best = offer;
    }
    bindings.set(
      requirementKey(requirement.moduleId, requirement.capabilityId),
      best && { moduleId: best.moduleId, version: best.version, deprecated: best.deprecatedSince !== null },
    );
  }
  return bindings;
}

/** A requirement whose binding changed between two passes. */
export interface BindingChange {
  key: string;
  before: Binding | null;
  after: Binding | null;
}

/** What differs between two passes' bindings (keys present in `after` only, and those removed from it are ignored). */
export function changedBindings(before: ReadonlyMap<string, Binding | null>, after: ReadonlyMap<string, Binding | null>): BindingChange[] {
  const changes: BindingChange[] = [];
  for (const [key, binding] of after) {
    const previous = before.get(key) ?? null;
    if (previous?.moduleId !== binding?.moduleId || previous?.version !== binding?.version) changes.push({ key, before: previous, after: binding });
  }
  return changes;
}

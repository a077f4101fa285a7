/**
 * A deployment reconciler over the real stores of a test app, stepped by hand (its own loop never
 * takes the lease): what the reconciler tests share.
 */
import { DeploymentReconciler, type DeploymentReconcilerOptions } from "../../src/deployments/deployment-reconciler.js";
import { openDeploymentCollections, type DeploymentCollections } from "../../src/deployments/deployment-store.js";
import type { RevisionStore } from "../../src/deployments/revision-store.js";
import type { Clock } from "../../src/shared/clock.js";
import type { TestApp } from "../support/http-app.js";

export function handSteppedReconciler(
  t: TestApp,
  clock: Clock,
  options: Partial<DeploymentReconcilerOptions> = {},
): { reconciler: DeploymentReconciler; collections: DeploymentCollections } {
  const collections = openDeploymentCollections(t.documents);
  const reconciler = new DeploymentReconciler({
    collections,
    // Only a rollback reads revisions; the steps these tests take never roll back.
    revisions: {} as RevisionStore,
    groups: t.groups,
    instances: t.instances,
    crashes: t.crashes,
    events: t.events,
    clock,
    logger: t.logs.logger("test.deployments"),
    runUnderLease: async () => false,
    intervalMs: 1_000,
    leaseTtlMs: 15_000,
    ...options,
  });
  return { reconciler, collections };
}

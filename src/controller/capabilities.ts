/**
 * The operator capabilities composed apart from the core (composition): global maintenance and
 * player admission, and the route modules serving them. The composition root builds this once
 * with the services it already holds and mounts the returned routes; `stop()` ends what runs.
 */
import type { AuditService } from "../audit/audit-service.js";
import type { KvMutex } from "../coordination/kv-mutex.js";
import type { GroupService } from "../domain/groups/group-service.js";
import type { InstanceService } from "../domain/instances/instance-service.js";
import { MaintenanceService } from "../domain/maintenance/maintenance-service.js";
import type { EventBus } from "../events/types.js";
import type { RouteModule } from "../http/route.js";
import { maintenanceRoutes } from "../http/routes/maintenance.js";
import { PlayerAdmission } from "../plugin-api/admission.js";
import type { Clock } from "../shared/clock.js";
import type { DocumentStore } from "../store/ports.js";

export interface CapabilityDeps {
  documents: DocumentStore;
  events: EventBus;
  clock: Clock;
  audit: AuditService;
  recordLocks: KvMutex;
  groups: GroupService;
  instances: InstanceService;
}

/** What the composition root uses of the capabilities. */
export interface Capabilities {
  maintenance: MaintenanceService;
  admission: PlayerAdmission;
  routeModules: RouteModule[];
  stop(): Promise<void>;
}

/** Builds the capabilities; nothing runs in the background until `start` (none yet). */
export function buildCapabilities(deps: CapabilityDeps): Capabilities {
  const maintenance = new MaintenanceService(deps.documents, deps.events, deps.clock, deps.recordLocks.scoped("maintenance:"));
  const admission = new PlayerAdmission({ maintenance });
  return {
    maintenance,
    admission,
    routeModules: [maintenanceRoutes({ maintenance, groups: deps.groups, instances: deps.instances, audit: deps.audit })],
    stop: async () => undefined,
  };
}

/**
 * The operator capabilities composed apart from the core (composition): global maintenance and
 * player admission, the software catalog and its build mirror, and the route modules serving them.
 * The composition root builds this once with the services it already holds and mounts the
 * returned routes; `stop()` ends what runs.
 */
import type { AuditService } from "../audit/audit-service.js";
import { BuildMirror } from "../catalog/build-mirror.js";
import { CatalogService } from "../catalog/catalog-service.js";
import type { ControllerConfig } from "../config/schema.js";
import type { KvMutex } from "../coordination/kv-mutex.js";
import type { GroupService } from "../domain/groups/group-service.js";
import type { InstanceService } from "../domain/instances/instance-service.js";
import { MAINTENANCE_BYPASS_PERMISSION, MaintenanceService } from "../domain/maintenance/maintenance-service.js";
import type { MinecraftLinks } from "../auth/minecraft-links.js";
import { ClusterConfigAdmin } from "../cluster/state/cluster-config-admin.js";
import type { ClusterService } from "../cluster/cluster-service.js";
import { clusterConfigRoutes } from "../http/routes/cluster-config.js";
import { LiveSettings } from "./live-settings.js";
import type { EventBus } from "../events/types.js";
import type { RouteModule } from "../http/route.js";
import { catalogRoutes } from "../http/routes/catalog.js";
import { maintenanceRoutes } from "../http/routes/maintenance.js";
import type { LogService } from "../logs/types.js";
import { PlayerAdmission } from "../plugin-api/admission.js";
import type { Clock } from "../shared/clock.js";
import type { BlobStore, DocumentStore } from "../store/ports.js";

export interface CapabilityDeps {
  config: Pick<ControllerConfig, "catalog" | "scheduler" | "crashes" | "share">;
  cluster: ClusterService;
  documents: DocumentStore;
  blobs: BlobStore;
  events: EventBus;
  clock: Clock;
  logs: LogService;
  audit: AuditService;
  recordLocks: KvMutex;
  groups: GroupService;
  instances: InstanceService;
  /** Minecraft account links: whose linked user holds `maintenance.bypass` is admitted during maintenance. */
  links?: Pick<MinecraftLinks, "hasPermission">;
}

/** What the composition root uses of the capabilities. */
export interface Capabilities {
  maintenance: MaintenanceService;
  admission: PlayerAdmission;
  catalog: CatalogService;
  mirror: BuildMirror;
  /** The cluster-shared settings in force here, following the active config version. */
  settings: LiveSettings;
  routeModules: RouteModule[];
  stop(): Promise<void>;
}

/** Builds the capabilities; nothing runs in the background yet. */
export function buildCapabilities(deps: CapabilityDeps): Capabilities {
  const { documents, clock, recordLocks, groups } = deps;
  const maintenance = new MaintenanceService(documents, deps.events, clock, recordLocks.scoped("maintenance:"));
  const { links } = deps;
  const bypasses = links ? (uuid: string) => links.hasPermission(uuid, MAINTENANCE_BYPASS_PERMISSION) : undefined;
  const admission = new PlayerAdmission({ maintenance, bypasses });
  const catalog = new CatalogService(documents, groups, clock, recordLocks.scoped("catalog:"));
  groups.useCatalog(catalog);
  const catalogSettings = deps.config.catalog;
  const mirror = new BuildMirror({
    documents,
    blobs: deps.blobs,
    clock,
    logger: deps.logs.logger("cloud.catalog"),
    downloadTimeoutMs: catalogSettings.downloadTimeoutSeconds * 1000,
    stallTimeoutMs: catalogSettings.stallTimeoutSeconds * 1000,
    downloadBytesMax: catalogSettings.downloadMbMax * 1024 * 1024,
    retryAfterMs: catalogSettings.retryAfterSeconds * 1000,
  });
  const settings = new LiveSettings(deps.config, deps.logs.logger("cloud.config"));
  const { cluster } = deps;
  settings.apply(cluster.activeConfig());
  const stopConfigWatch = cluster.onConfigChange((active) => settings.apply(active));
  return {
    maintenance,
    admission,
    catalog,
    mirror,
    settings,
    routeModules: [
      maintenanceRoutes({ maintenance, groups, instances: deps.instances, audit: deps.audit }),
      catalogRoutes({ catalog, mirror, audit: deps.audit }),
      clusterConfigRoutes({ admin: new ClusterConfigAdmin(cluster, deps.events), settings, active: () => cluster.activeConfig(), audit: deps.audit }),
    ],
    stop: async () => stopConfigWatch(),
  };
}

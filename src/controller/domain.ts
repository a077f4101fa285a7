/**
 * The domain wing: groups, instances, crashes, nodes, join tokens, the overview, templates, the
 * operator capabilities (capabilities.ts) and deployments, built on the stores with the cluster-wide
 * record locks. Nothing here runs in the background except what the capabilities start.
 */
import type { AuditService } from "../audit/audit-service.js";
import type { ClusterService } from "../cluster/cluster-service.js";
import type { ControllerConfig } from "../config/schema.js";
import type { KvMutex } from "../coordination/kv-mutex.js";
import { openDeploymentCollections, type DeploymentCollections } from "../deployments/deployment-store.js";
import { DeploymentService } from "../deployments/deployment-service.js";
import { RevisionStore } from "../deployments/revision-store.js";
import { CrashService } from "../domain/crashes/crash-service.js";
import { GroupService } from "../domain/groups/group-service.js";
import { InstanceService } from "../domain/instances/instance-service.js";
import { NodeTokenService } from "../domain/node-tokens/node-token-service.js";
import { NodeService } from "../domain/nodes/node-service.js";
import { OverviewService } from "../domain/overview/overview-service.js";
import { isoFromMs } from "../domain/shared/time.js";
import type { ControllerEventBus } from "../events/bus.js";
import { EventTypes } from "../events/event-types.js";
import type { ControllerLogService } from "../logs/logger.js";
import type { Logger } from "../logs/types.js";
import type { PlayerService } from "../plugin-api/players.js";
import type { Clock } from "../shared/clock.js";
import { ApiError } from "../shared/errors.js";
import type { BlobStore, DocumentStore } from "../store/ports.js";
import { TemplateService } from "../templates/template-service.js";
import { buildCapabilities, type Capabilities } from "./capabilities.js";
import type { MinecraftLinks } from "../auth/minecraft-links.js";
import type { Cleanups } from "./lifecycle.js";

/** The player registry, built later (plugin-api wing); its counts feed the overview and the metrics. */
export interface PlayersRef {
  current: PlayerService | null;
}

export interface DomainOptions {
  config: ControllerConfig;
  cluster: ClusterService;
  documents: DocumentStore;
  blobs: BlobStore;
  events: ControllerEventBus;
  clock: Clock;
  logs: ControllerLogService;
  log: Logger;
  audit: AuditService;
  recordLocks: KvMutex;
  players: PlayersRef;
  spoolDirectory?: string;
  cleanups: Cleanups;
  /** Minecraft account links: a linked staff account may join during maintenance. */
  links?: Pick<MinecraftLinks, "hasPermission">;
}

export interface Domain {
  instances: InstanceService;
  crashes: CrashService;
  groups: GroupService;
  nodes: NodeService;
  nodeTokens: NodeTokenService;
  overview: OverviewService;
  templates: TemplateService;
  capabilities: Capabilities;
  deploymentCollections: DeploymentCollections;
  revisions: RevisionStore;
  deployments: DeploymentService;
}

/** Builds the domain services; the capabilities and the deployment records' cleanups join `cleanups`. */
export function buildDomain(options: DomainOptions): Domain {
  const { config, cluster, documents, blobs, events, clock, logs, log, audit, recordLocks, cleanups } = options;
  const instances = new InstanceService(documents, clock);
  const crashes = new CrashService(documents, clock);
  const groups = new GroupService(documents, events, clock, instances, recordLocks.scoped("group:"));
  const nodes = new NodeService(documents, events, clock, instances, undefined, recordLocks.scoped("node:"));
  const nodeTokens = new NodeTokenService(documents, clock, recordLocks.scoped("node-token:"));
  // The player registry lives in the key-value store; its counts feed the overview.
  const players = options.players;
  const overview = new OverviewService(groups, instances, nodes, { onlineCount: () => (players.current ? players.current.onlineCount() : Promise.resolve(0)) });
  // A template write (an import of a large archive) may hold the lock a while: others wait up to a minute.
  const templates = new TemplateService({
    documents,
    blobs,
    events,
    clock,
    spoolDirectory: options.spoolDirectory,
    writeLock: recordLocks.scoped("template:", { waitMs: 60_000 }),
  });
  const capabilities = buildCapabilities({
    config,
    cluster,
    documents,
    blobs,
    events,
    clock,
    logs,
    audit,
    recordLocks,
    groups,
    instances,
    links: options.links,
  });
  cleanups.push({ name: "capabilities", run: () => capabilities.stop() });
  const deploymentCollections = openDeploymentCollections(documents);
  const templateHash = async (name: string) => {
    try {
      return (await templates.get(name)).hash;
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) return null;
      throw err;
    }
  };
  const revisions = new RevisionStore(
    deploymentCollections,
    templateHash,
    () => isoFromMs(clock.nowMs()),
    (platform, version) => capabilities.catalog.freeze(platform, version),
  );
  const deployments = new DeploymentService({
    collections: deploymentCollections,
    revisions,
    groups,
    instances,
    templateHash,
    events,
    clock,
    controlLock: recordLocks,
  });
  const forgetDeployments = events.subscribe(EventTypes.GROUP_DELETED, (e) =>
    deployments
      .forgetGroup(String(e.data.groupName))
      .catch((err: unknown) => log.warn(`Removing the deployments of group ${String(e.data.groupName)} failed`, err)),
  );
  cleanups.push({ name: "deployment records", run: () => forgetDeployments.unsubscribe() });
  return { instances, crashes, groups, nodes, nodeTokens, overview, templates, capabilities, deploymentCollections, revisions, deployments };
}

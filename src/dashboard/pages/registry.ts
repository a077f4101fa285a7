/** The pages, in navigation order, with the permission that shows each. */
import type { FunctionComponent } from "preact";
import type { Route } from "../lib/router.js";
import { Overview } from "./overview.js";
import { GroupsPage } from "./groups.js";
import { InstancesPage } from "./instances.js";
import { CrashesPage } from "./crashes.js";
import { NodesPage } from "./nodes.js";
import { TemplatesPage } from "./templates.js";
import { DeploymentsPage } from "./deployments.js";
import { PlayersPage } from "./players.js";
import { BackupsPage } from "./backups.js";
import { ClusterPage } from "./cluster.js";
import { MetricsPage } from "./metrics.js";
import { LogsPage } from "./logs.js";
import { AuditPage } from "./audit.js";
import { DiagnosticsPage } from "./diagnostics.js";

export interface PageDef {
  id: string;
  label: string;
  perm: string;
  component: FunctionComponent<{ route: Route }>;
}

export const PAGES: PageDef[] = [
  { id: "overview", label: "Overview", perm: "system.view", component: Overview },
  { id: "groups", label: "Groups", perm: "groups.view", component: GroupsPage },
  { id: "instances", label: "Instances", perm: "instances.view", component: InstancesPage },
  { id: "crashes", label: "Crashes", perm: "crashes.view", component: CrashesPage },
  { id: "nodes", label: "Nodes", perm: "nodes.view", component: NodesPage },
  { id: "templates", label: "Templates", perm: "templates.view", component: TemplatesPage },
  { id: "deployments", label: "Deployments", perm: "deployments.view", component: DeploymentsPage },
  { id: "players", label: "Players", perm: "players.view", component: PlayersPage },
  { id: "metrics", label: "Metrics", perm: "system.view", component: MetricsPage },
  { id: "backups", label: "Backups", perm: "BACKUPS_VIEW", component: BackupsPage },
  { id: "cluster", label: "Cluster", perm: "CLUSTER_VIEW", component: ClusterPage },
  { id: "logs", label: "Logs", perm: "system.logs.view", component: LogsPage },
  { id: "audit", label: "Audit", perm: "audit.view", component: AuditPage },
  { id: "diagnostics", label: "Diagnostics", perm: "system.diagnostics", component: DiagnosticsPage },
];

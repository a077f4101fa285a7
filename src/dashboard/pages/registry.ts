/**
 * The pages, in navigation order, with the permission that shows each and how its code is loaded.
 *
 * This list is the dashboard's one extension point for pages: a page is an entry here and a module
 * exporting a component that takes `{ route }`. Each page but the overview is its own chunk, loaded
 * the first time it is shown (and fetched in the background once the first page is on screen), so
 * adding a page costs the initial load nothing. A page of a later area (platform modules: `modules`,
 * permission `modules.view`, in the "Extensions" section) is one more entry with its `load`.
 */
import type { FunctionComponent } from "preact";
import type { Route } from "../lib/router.js";
import { Overview } from "./overview.js";

export type PageComponent = FunctionComponent<{ route: Route }>;

export interface PageDef {
  id: string;
  label: string;
  /** Shown only to users holding it; the page's routes ask for it (or a narrower one) anyway. */
  perm: string;
  /** A heading the navigation groups pages under. */
  section: "Network" | "Operations" | "Administration" | "Extensions";
  load(): Promise<PageComponent>;
}

/** A loader that imports once and remembers the component (a failed import is tried again next time). */
export function lazyPage(importer: () => Promise<PageComponent>): () => Promise<PageComponent> {
  let loaded: Promise<PageComponent> | null = null;
  return () => {
    loaded ??= importer().catch((err: unknown) => {
      loaded = null;
      throw err;
    });
    return loaded;
  };
}

const eager = (component: PageComponent) => () => Promise.resolve(component);

export const PAGES: readonly PageDef[] = [
  { id: "overview", label: "Overview", perm: "system.view", section: "Network", load: eager(Overview) },
  { id: "groups", label: "Groups", perm: "groups.view", section: "Network", load: lazyPage(() => import("./groups.js").then((m) => m.GroupsPage)) },
  {
    id: "instances",
    label: "Instances",
    perm: "instances.view",
    section: "Network",
    load: lazyPage(() => import("./instances.js").then((m) => m.InstancesPage)),
  },
  { id: "crashes", label: "Crashes", perm: "crashes.view", section: "Network", load: lazyPage(() => import("./crashes.js").then((m) => m.CrashesPage)) },
  { id: "nodes", label: "Nodes", perm: "nodes.view", section: "Network", load: lazyPage(() => import("./nodes.js").then((m) => m.NodesPage)) },
  { id: "players", label: "Players", perm: "players.view", section: "Network", load: lazyPage(() => import("./players.js").then((m) => m.PlayersPage)) },
  {
    id: "templates",
    label: "Templates",
    perm: "templates.view",
    section: "Operations",
    load: lazyPage(() => import("./templates.js").then((m) => m.TemplatesPage)),
  },
  {
    id: "deployments",
    label: "Deployments",
    perm: "deployments.view",
    section: "Operations",
    load: lazyPage(() => import("./deployments.js").then((m) => m.DeploymentsPage)),
  },
  { id: "metrics", label: "Metrics", perm: "system.view", section: "Operations", load: lazyPage(() => import("./metrics.js").then((m) => m.MetricsPage)) },
  { id: "logs", label: "Logs", perm: "system.logs.view", section: "Operations", load: lazyPage(() => import("./logs.js").then((m) => m.LogsPage)) },
  {
    id: "diagnostics",
    label: "Diagnostics",
    perm: "system.diagnostics",
    section: "Operations",
    load: lazyPage(() => import("./diagnostics.js").then((m) => m.DiagnosticsPage)),
  },
  { id: "backups", label: "Backups", perm: "BACKUPS_VIEW", section: "Administration", load: lazyPage(() => import("./backups.js").then((m) => m.BackupsPage)) },
  { id: "cluster", label: "Cluster", perm: "CLUSTER_VIEW", section: "Administration", load: lazyPage(() => import("./cluster.js").then((m) => m.ClusterPage)) },
  { id: "users", label: "Users", perm: "users.manage", section: "Administration", load: lazyPage(() => import("./users.js").then((m) => m.UsersPage)) },
  { id: "roles", label: "Roles", perm: "roles.manage", section: "Administration", load: lazyPage(() => import("./roles.js").then((m) => m.RolesPage)) },
  { id: "audit", label: "Audit", perm: "audit.view", section: "Administration", load: lazyPage(() => import("./audit.js").then((m) => m.AuditPage)) },
];

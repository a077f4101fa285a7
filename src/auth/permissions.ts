/**
 * The permission catalog and the built-in roles. Every permission the specification names is here
 * (templates.view, templates.update, CLUSTER_VIEW, CLUSTER_MANAGE, BACKUPS_VIEW, BACKUPS_MANAGE,
 * BACKUPS_RESTORE, audit.view, system.logs.view, share.invoke, MODULES_MANAGE), spelled as the
 * specification spells them, plus the ones this controller's routes need. Routes name a permission
 * from this catalog; role definitions are validated against it.
 */

export interface PermissionInfo {
  readonly name: string;
  readonly description: string;
  /** Read-only permissions are granted to VIEWER. */
  readonly readOnly: boolean;
  /** Administrative permissions are held by ADMIN only by default. */
  readonly adminOnly: boolean;
}

const p = (name: string, description: string, kind: "view" | "operate" | "admin"): PermissionInfo => ({
  name,
  description,
  readOnly: kind === "view",
  adminOnly: kind === "admin",
});

/** Every permission, in display order. */
export const PERMISSION_CATALOG: readonly PermissionInfo[] = [
  p("groups.view", "List and read groups", "view"),
  p("groups.create", "Create groups", "operate"),
  p("groups.update", "Change groups, including maintenance", "operate"),
  p("groups.delete", "Delete groups and stop their instances", "operate"),
  p("groups.start", "Schedule instances of a group", "operate"),
  p("instances.view", "List and read instances", "view"),
  p("instances.stop", "Stop and force-stop instances", "operate"),
  p("instances.delete", "Delete the records of finished instances", "operate"),
  p("instances.command", "Send console commands to instances", "operate"),
  p("instances.console", "Attach to instance console streams", "operate"),
  p("players.view", "List the players online and where they are", "view"),
  p("players.transfer", "Move a player to another instance or group", "operate"),
  p("crashes.view", "List and read crash records", "view"),
  p("templates.view", "List and read templates, versions and files", "view"),
  p("templates.create", "Create and import templates", "operate"),
  p("templates.update", "Change template files, variables and versions; roll back", "operate"),
  p("templates.delete", "Delete templates and template versions", "operate"),
  p("nodes.view", "List and read nodes", "view"),
  p("nodes.manage", "Drain, undrain, cordon and remove nodes", "operate"),
  p("tokens.manage", "Create, list and revoke node join tokens; revoke workload tokens", "operate"),
  p("deployments.view", "List and read deployments", "view"),
  p("catalog.view", "List the software catalog's builds", "view"),
  p("catalog.manage", "Add, change, recommend and remove catalog builds", "operate"),
  p("deployments.manage", "Start, pause, resume and roll back deployments", "operate"),
  p("modules.view", "List platform modules and capabilities; call the GET routes modules mount", "view"),
  p("modules.invoke", "Call the POST, PUT, PATCH and DELETE routes platform modules mount", "operate"),
  p("MODULES_MANAGE", "Upload, upgrade, install and remove platform modules", "operate"),
  p("system.view", "Read the overview and system status", "view"),
  p("maintenance.manage", "Switch global maintenance on and off, set its message and allowed players", "operate"),
  p("maintenance.bypass", "A linked Minecraft account of the holder joins during maintenance", "operate"),
  p("events.view", "Open the event stream (each event also needs the view permission of its surface)", "view"),
  p("system.logs.view", "Read controller and daemon logs", "admin"),
  p("system.diagnostics", "Read the redacted diagnostics bundle", "admin"),
  p("share.invoke", "Share logs, crash reports and diagnostics by link", "admin"),
  p("audit.view", "Read the audit log", "admin"),
  p("users.manage", "List, create, change and delete users; link and unlink any user's Minecraft accounts", "admin"),
  p("minecraft.link", "Link and unlink one's own Minecraft accounts (in-game commands then act with one's roles)", "operate"),
  p("roles.manage", "List, create, change and delete roles", "admin"),
  p("CLUSTER_VIEW", "Read cluster state, members, join tokens and leases", "view"),
  p("CLUSTER_MANAGE", "Change cluster membership, join tokens, seed and shared config", "admin"),
  p("BACKUPS_VIEW", "List and verify backups", "view"),
  p("BACKUPS_MANAGE", "Create and prune backups", "operate"),
  p("BACKUPS_RESTORE", "Restore a backup; download and upload bundles (they hold every user and the audit log)", "admin"),
];

/** Every permission name. */
export const ALL_PERMISSIONS: readonly string[] = PERMISSION_CATALOG.map((perm) => perm.name);

const KNOWN = new Set(ALL_PERMISSIONS);

/** True when `name` is in the catalog (case-sensitive: names are spelled as the spec spells them). */
export function isKnownPermission(name: string): boolean {
  return KNOWN.has(name);
}

export const ADMIN_ROLE = "ADMIN";
export const OPERATOR_ROLE = "OPERATOR";
export const VIEWER_ROLE = "VIEWER";

export interface BuiltInRole {
  readonly name: string;
  readonly description: string;
  readonly permissions: readonly string[];
}

/**
 * Built-in roles, defined here rather than stored so that a permission added in a later release
 * reaches them without a migration. ADMIN holds everything; OPERATOR runs the network but cannot
 * manage users, roles, the cluster or restores, nor read the audit log or logs, nor share; VIEWER
 * reads only.
 */
export const BUILT_IN_ROLES: readonly BuiltInRole[] = [
  { name: ADMIN_ROLE, description: "Everything", permissions: ALL_PERMISSIONS },
  {
    name: OPERATOR_ROLE,
    description: "Operate groups, instances, templates, nodes and deployments",
    permissions: PERMISSION_CATALOG.filter((perm) => !perm.adminOnly).map((perm) => perm.name),
  },
  {
    name: VIEWER_ROLE,
    description: "Read-only access",
    permissions: PERMISSION_CATALOG.filter((perm) => perm.readOnly).map((perm) => perm.name),
  },
];

/** The built-in role called `name` (case-insensitive), if any. */
export function builtInRole(name: string): BuiltInRole | undefined {
  const upper = name.toUpperCase();
  return BUILT_IN_ROLES.find((role) => role.name === upper);
}

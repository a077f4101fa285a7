/**
 * Users, roles and permissions as the dashboard shows them (`/api/v1/users`, `/api/v1/roles`,
 * `/api/v1/permissions`), with the checks the forms make before sending. The controller checks
 * again and has the last word (src/auth/user-directory.ts, role-directory.ts).
 */

export interface User {
  username: string;
  roles: string[];
  createdAt: string;
  updatedAt: string;
}

export interface Role {
  name: string;
  description: string;
  permissions: string[];
  builtIn: boolean;
}

export interface Permission {
  name: string;
  description: string;
}

export const BUILT_IN_ROLE_NAMES = ["ADMIN", "OPERATOR", "VIEWER"] as const;
/** The controller's shortest password. */
export const PASSWORD_LENGTH_MIN = 8;
/** Usernames (HTML `pattern`, which the browser anchors; `-` escaped for the `v` flag). */
export const USERNAME_PATTERN = "[A-Za-z0-9][A-Za-z0-9_.\\-]{0,63}";
/** Role names, likewise. */
export const ROLE_NAME_PATTERN = "[A-Za-z][A-Za-z0-9_.\\-]{0,63}";

/** Why a password and its repetition cannot be sent, or null. */
export function passwordProblem(password: string, repeat: string): string | null {
  if (password.length < PASSWORD_LENGTH_MIN) return `The password needs at least ${PASSWORD_LENGTH_MIN} characters`;
  if (password !== repeat) return "The two passwords differ";
  return null;
}

/**
 * The catalog in sections by what a permission is about: the part before the first dot
 * (`groups.view` is in "groups"), or before the first underscore for the upper-case names
 * (`CLUSTER_VIEW` is in "cluster"), in the catalog's order.
 */
export function permissionSections(catalog: readonly Permission[]): [string, Permission[]][] {
  const sections = new Map<string, Permission[]>();
  for (const permission of catalog) {
    const name = permission.name;
    const section = (name.includes(".") ? name.slice(0, name.indexOf(".")) : name.split("_")[0]).toLowerCase();
    const list = sections.get(section) ?? [];
    list.push(permission);
    sections.set(section, list);
  }
  return [...sections];
}

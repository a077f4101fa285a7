/**
 * Roles: the built-in ADMIN, OPERATOR and VIEWER (defined in code, immutable) and custom roles
 * stored in the collection `roles` (`_id` = role name). Permissions are validated against the
 * catalog.
 */
import { KeyedMutex, type KeyedLock } from "../domain/shared/keyed-mutex.js";
import type { Clock } from "../shared/clock.js";
import { ApiError, conflict, notFound, validationError } from "../shared/errors.js";
import { DuplicateKeyError, type Collection, type Doc, type DocumentStore } from "../store/ports.js";
import { BUILT_IN_ROLES, builtInRole, isKnownPermission, PERMISSION_CATALOG } from "./permissions.js";

/** The one lock key of the user and role directories' writes. */
export const DIRECTORY_LOCK = "directory";

export const ROLES_COLLECTION = "roles";
/** Role names: a letter, then letters, digits, `_`, `.` or `-`; at most 64 characters. */
export const ROLE_NAME_PATTERN = "^[A-Za-z][A-Za-z0-9_.-]{0,63}$";
const ROLE_NAME_REGEX = new RegExp(ROLE_NAME_PATTERN);

export interface RoleDoc extends Doc {
  name: string;
  description: string;
  permissions: string[];
  createdAt: string;
  updatedAt: string;
}

/** The REST form of a role. */
export interface RoleView {
  name: string;
  description: string;
  permissions: string[];
  builtIn: boolean;
}

export interface RoleChanges {
  description?: string;
  permissions?: string[];
}

/** Thrown for changes to ADMIN, OPERATOR or VIEWER. */
const protectedRole = (name: string) => new ApiError(400, "PROTECTED", `Built-in role ${name} cannot be changed or deleted`);

/** Sorts and de-duplicates permissions, rejecting unknown names with 422 naming the field. */
function checkPermissions(permissions: readonly string[]): string[] {
  for (const perm of permissions) {
    if (!isKnownPermission(perm)) throw validationError(`permissions: unknown permission ${JSON.stringify(perm).slice(0, 80)}`);
  }
  const order = new Map(PERMISSION_CATALOG.map((perm, i) => [perm.name, i]));
  return [...new Set(permissions)].sort((a, b) => (order.get(a) ?? 0) - (order.get(b) ?? 0));
}

function toView(doc: RoleDoc): RoleView {
  return { name: doc.name, description: doc.description, permissions: [...doc.permissions], builtIn: false };
}

/** Reads and changes roles; resolves role names to permission sets for the authenticator. */
export class RoleDirectory {
  private readonly roles: Collection<RoleDoc>;

  constructor(
    documents: DocumentStore,
    private readonly clock: Clock,
    /** Serialises role writes with the user directory's (see {@link DIRECTORY_LOCK}). */
    private readonly writes: KeyedLock = new KeyedMutex(),
  ) {
    this.roles = documents.collection<RoleDoc>(ROLES_COLLECTION);
  }

  /** Built-in roles first, then custom roles by name. */
  async list(): Promise<RoleView[]> {
    const custom = await this.roles.find({}, { sort: { field: "name", direction: 1 } });
    return [...BUILT_IN_ROLES.map((role) => ({ ...role, permissions: [...role.permissions], builtIn: true })), ...custom.map(toView)];
  }

  /** The role called `name`, or null. Built-in names match case-insensitively. */
  async find(name: string): Promise<RoleView | null> {
    const builtIn = builtInRole(name);
    if (builtIn) return { ...builtIn, permissions: [...builtIn.permissions], builtIn: true };
    const doc = await this.roles.get(name);
    return doc ? toView(doc) : null;
  }

  /** @throws ApiError 404 when unknown. */
  async get(name: string): Promise<RoleView> {
    const role = await this.find(name);
    if (!role) throw notFound(`Role not found: ${name}`);
    return role;
  }

  /** Canonical names of `names`; 422 naming the field when one does not exist. */
  async resolveNames(names: readonly string[]): Promise<string[]> {
    const out: string[] = [];
    for (const name of names) {
      const role = await this.find(name);
      if (!role) throw validationError(`roles: unknown role ${JSON.stringify(name).slice(0, 80)}`);
      if (!out.includes(role.name)) out.push(role.name);
    }
    return out;
  }

  /** The union of the permissions of `names`; names that no longer exist contribute nothing. */
  async permissionsOf(names: readonly string[]): Promise<Set<string>> {
    const out = new Set<string>();
    for (const name of names) {
      const role = await this.find(name);
      for (const perm of role?.permissions ?? []) out.add(perm);
    }
    return out;
  }

  /** @throws 422 for a bad name or permission, 409 CONFLICT when the name is taken. */
  async create(input: { name: string; description?: string; permissions: string[] }): Promise<RoleView> {
    if (!ROLE_NAME_REGEX.test(input.name)) throw validationError(`name: must match ${ROLE_NAME_PATTERN}`);
    if (builtInRole(input.name)) throw conflict(`Role already exists: ${input.name}`);
    const now = new Date(this.clock.nowMs()).toISOString();
    const doc: RoleDoc = {
      _id: input.name,
      name: input.name,
      description: input.description ?? "",
      permissions: checkPermissions(input.permissions),
      createdAt: now,
      updatedAt: now,
    };
    try {
      await this.roles.insert(doc);
    } catch (err) {
      if (err instanceof DuplicateKeyError) throw conflict(`Role already exists: ${input.name}`);
      throw err;
    }
    return toView(doc);
  }

  /** Changes a custom role; returns the role before and after. */
  update(name: string, changes: RoleChanges): Promise<{ before: RoleView; after: RoleView }> {
    if (builtInRole(name)) throw protectedRole(name.toUpperCase());
    return this.writes.run(DIRECTORY_LOCK, async () => {
      const doc = await this.roles.get(name);
      if (!doc) throw notFound(`Role not found: ${name}`);
      const next: RoleDoc = {
        ...doc,
        description: changes.description ?? doc.description,
        permissions: changes.permissions ? checkPermissions(changes.permissions) : doc.permissions,
        updatedAt: new Date(this.clock.nowMs()).toISOString(),
      };
      await this.roles.put(next);
      return { before: toView(doc), after: toView(next) };
    });
  }

  /** Deletes a custom role that no user holds (`inUse` answers that); returns the deleted role. */
  delete(name: string, inUse: (role: string) => Promise<boolean>): Promise<RoleView> {
    if (builtInRole(name)) throw protectedRole(name.toUpperCase());
    // Under the directory's lock: a user given the role meanwhile is seen by `inUse`.
    return this.writes.run(DIRECTORY_LOCK, async () => {
      const doc = await this.roles.get(name);
      if (!doc) throw notFound(`Role not found: ${name}`);
      if (await inUse(doc.name)) throw conflict(`Role ${name} is still assigned to users`, "ROLE_IN_USE");
      await this.roles.delete(doc._id);
      return toView(doc);
    });
  }
}

/**
 * Users in the collection `users`: a random `_id`, a unique `username` (index `users_username`), a
 * scrypt password hash that never leaves this module, role names and a token version that a password
 * change bumps (so earlier tokens stop verifying).
 */
import { KeyedMutex, type KeyedLock } from "../domain/shared/keyed-mutex.js";
import { DIRECTORY_LOCK } from "./role-directory.js";
import { randomUUID } from "node:crypto";
import type { Clock } from "../shared/clock.js";
import { conflict, notFound, validationError } from "../shared/errors.js";
import { DuplicateKeyError, type Collection, type Doc, type DocumentStore } from "../store/ports.js";
import { hashPassword, type ScryptParams } from "./password.js";
import { ADMIN_ROLE } from "./permissions.js";
import type { RoleDirectory } from "./role-directory.js";

export const USERS_COLLECTION = "users";
/** Usernames: a letter or digit, then letters, digits, `_`, `.` or `-`; at most 64 characters. */
export const USERNAME_PATTERN = "^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$";
const USERNAME_REGEX = new RegExp(USERNAME_PATTERN);
export const PASSWORD_LENGTH_MIN = 8;
export const PASSWORD_LENGTH_MAX = 1024;

export interface UserDoc extends Doc {
  username: string;
  passwordHash: string;
  roles: string[];
  tokenVersion: number;
  createdAt: string;
  updatedAt: string;
}

/** The REST form of a user: never the password hash. */
export interface UserView {
  username: string;
  roles: string[];
  createdAt: string;
  updatedAt: string;
}

export interface UserChanges {
  password?: string;
  roles?: string[];
}

/** Thrown when a change would leave no user holding ADMIN. */
const lastAdmin = () => conflict("The last user holding ADMIN cannot lose it", "LAST_ADMIN");

export function toUserView(doc: UserDoc): UserView {
  return { username: doc.username, roles: [...doc.roles], createdAt: doc.createdAt, updatedAt: doc.updatedAt };
}

function checkPassword(password: string): void {
  if (password.length < PASSWORD_LENGTH_MIN || password.length > PASSWORD_LENGTH_MAX) {
    throw validationError(`password: must be ${PASSWORD_LENGTH_MIN} to ${PASSWORD_LENGTH_MAX} characters`);
  }
}

/** Reads and changes users. Checks needing several documents (last admin) are best effort across controllers. */
export class UserDirectory {
  private readonly users: Collection<UserDoc>;

  constructor(
    documents: DocumentStore,
    private readonly roles: RoleDirectory,
    private readonly clock: Clock,
    private readonly passwordParams?: ScryptParams,
    /** Called after a write that revokes the user's tokens (the token version moved). */
    private readonly tokensRevoked: () => void = () => undefined,
    /**
     * Serialises the directory's read-modify-writes (a password change and a role change of one
     * user; two demotions that must leave one ADMIN), with the role directory's: one key,
     * {@link DIRECTORY_LOCK}. Cluster-wide when the controller passes a key-value lock.
     */
    private readonly writes: KeyedLock = new KeyedMutex(),
  ) {
    this.users = documents.collection<UserDoc>(USERS_COLLECTION, {
      indexes: [{ name: "users_username", field: "username", unique: true }],
    });
  }

  async count(): Promise<number> {
    return this.users.count();
  }

  async list(): Promise<UserView[]> {
    const docs = await this.users.find({}, { sort: { field: "username", direction: 1 } });
    return docs.map(toUserView);
  }

  /** The stored user (with hash) for authentication; null when unknown. */
  async findByUsername(username: string): Promise<UserDoc | null> {
    const [doc] = await this.users.find({ username }, { limit: 1 });
    return doc ?? null;
  }

  async findById(id: string): Promise<UserDoc | null> {
    return this.users.get(id);
  }

  /** @throws 404 when unknown. */
  async get(username: string): Promise<UserView> {
    return toUserView(await this.require(username));
  }

  /** True when some user holds `role`. */
  async holdsRole(role: string): Promise<boolean> {
    const docs = await this.users.find();
    return docs.some((doc) => doc.roles.includes(role));
  }

  /** @throws 422 for a bad username, password or role; 409 CONFLICT when the username is taken. */
  async create(input: { username: string; password: string; roles: string[] }): Promise<UserView> {
    if (!USERNAME_REGEX.test(input.username)) throw validationError(`username: must match ${USERNAME_PATTERN}`);
    checkPassword(input.password);
    const passwordHash = await hashPassword(input.password, this.passwordParams);
    // Under the directory's lock: a role deleted meanwhile is not given to the new user.
    return this.writes.run(DIRECTORY_LOCK, async () => {
      const roles = await this.roles.resolveNames(input.roles);
      const now = new Date(this.clock.nowMs()).toISOString();
      const doc: UserDoc = { _id: randomUUID(), username: input.username, passwordHash, roles, tokenVersion: 1, createdAt: now, updatedAt: now };
      try {
        await this.users.insert(doc);
      } catch (err) {
        if (err instanceof DuplicateKeyError) throw conflict(`User already exists: ${input.username}`);
        throw err;
      }
      return toUserView(doc);
    });
  }

  /** Changes password and/or roles; returns the user before and after. */
  update(username: string, changes: UserChanges): Promise<{ before: UserView; after: UserView }> {
    return this.writes.run(DIRECTORY_LOCK, () => this.updateNow(username, changes));
  }

  private async updateNow(username: string, changes: UserChanges): Promise<{ before: UserView; after: UserView }> {
    const doc = await this.require(username);
    const next: UserDoc = { ...doc, updatedAt: new Date(this.clock.nowMs()).toISOString() };
    if (changes.roles !== undefined) {
      next.roles = await this.roles.resolveNames(changes.roles);
      if (doc.roles.includes(ADMIN_ROLE) && !next.roles.includes(ADMIN_ROLE) && (await this.adminCount()) <= 1) throw lastAdmin();
    }
    if (changes.password !== undefined) {
      checkPassword(changes.password);
      next.passwordHash = await hashPassword(changes.password, this.passwordParams);
      next.tokenVersion = doc.tokenVersion + 1;
    }
    await this.users.put(next);
    if (next.tokenVersion !== doc.tokenVersion) this.tokensRevoked();
    return { before: toUserView(doc), after: toUserView(next) };
  }

  /** Deletes `username` on behalf of `actor`: never oneself, never the last admin. */
  delete(username: string, actor: string): Promise<UserView> {
    return this.writes.run(DIRECTORY_LOCK, async () => {
      const doc = await this.require(username);
      if (doc.username === actor) throw conflict("You cannot delete your own user", "CANNOT_DELETE_SELF");
      if (doc.roles.includes(ADMIN_ROLE) && (await this.adminCount()) <= 1) throw lastAdmin();
      await this.users.delete(doc._id);
      return toUserView(doc);
    });
  }

  /** Inserts a user document as is (bootstrap); false when the username already exists. */
  async insertIfAbsent(doc: UserDoc): Promise<boolean> {
    try {
      await this.users.insert(doc);
      return true;
    } catch (err) {
      if (err instanceof DuplicateKeyError) return false;
      throw err;
    }
  }

  private async adminCount(): Promise<number> {
    const docs = await this.users.find();
    return docs.filter((doc) => doc.roles.includes(ADMIN_ROLE)).length;
  }

  private async require(username: string): Promise<UserDoc> {
    const doc = await this.findByUsername(username);
    if (!doc) throw notFound(`User not found: ${username}`);
    return doc;
  }
}

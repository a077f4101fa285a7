/**
 * Minecraft account links in the collection `minecraft_links`: `_id` is the linked Minecraft UUID
 * (lower case, the textual form with dashes), so one account belongs to at most one user; each link
 * names the user by `_id` and by username. In-game commands of a linked account act with the user's
 * roles (`permissionsOf`); an unlinked account holds nothing. Writes run under the user and role
 * directories' lock ({@link DIRECTORY_LOCK}): a user deleted meanwhile gets no link, and two links
 * of one account through different controllers never interleave. Reads are not cached, so an
 * unlink takes effect on the next check, on every controller. docs/decisions/accounts.md.
 */
import { KeyedMutex, type KeyedLock } from "../domain/shared/keyed-mutex.js";
import type { Clock } from "../shared/clock.js";
import { conflict, notFound, validationError } from "../shared/errors.js";
import type { Collection, Doc, DocumentStore } from "../store/ports.js";
import { DIRECTORY_LOCK, type RoleDirectory } from "./role-directory.js";
import type { UserDirectory, UserDoc } from "./user-directory.js";

export const MINECRAFT_LINKS_COLLECTION = "minecraft_links";
/** Accounts one user may link (a main account and a few alternates); beyond: 409 MINECRAFT_LINKS_MAX. */
export const minecraftLinksPerUserMax = 5;
/** A Minecraft UUID in its textual form (any version: offline-mode servers derive version 3). */
export const MINECRAFT_UUID_PATTERN = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";
const UUID_REGEX = new RegExp(MINECRAFT_UUID_PATTERN);

interface LinkDoc extends Doc {
  /** The user's `_id`: a link outlives no user, even one deleted and created again under the same name. */
  userId: string;
  username: string;
  linkedAt: string;
  linkedBy: string;
}

/** The REST form of a link. */
export interface MinecraftLinkView {
  uuid: string;
  username: string;
  linkedAt: string;
  linkedBy: string;
}

/** What a plugin learns of an account: linked or not, and the permissions it holds. */
export interface AccountPermissions {
  uuid: string;
  linked: boolean;
  permissions: ReadonlySet<string>;
}

const toView = (doc: LinkDoc): MinecraftLinkView => ({ uuid: doc._id, username: doc.username, linkedAt: doc.linkedAt, linkedBy: doc.linkedBy });

/** The canonical form of a Minecraft UUID; 422 for anything else. */
export function canonicalMinecraftUuid(uuid: string): string {
  if (!UUID_REGEX.test(uuid)) throw validationError(`uuid: must be a Minecraft UUID (8-4-4-4-12 hexadecimal digits), got ${JSON.stringify(uuid.slice(0, 80))}`);
  return uuid.toLowerCase();
}

/** Links, unlinks and resolves Minecraft accounts; see the module comment. */
export class MinecraftLinks {
  private readonly links: Collection<LinkDoc>;

  constructor(
    documents: DocumentStore,
    private readonly users: UserDirectory,
    private readonly roles: RoleDirectory,
    private readonly clock: Clock,
    private readonly writes: KeyedLock = new KeyedMutex(),
  ) {
    this.links = documents.collection<LinkDoc>(MINECRAFT_LINKS_COLLECTION, { indexes: [{ name: "minecraft_links_user", field: "userId" }] });
  }

  /** The accounts `username` linked, oldest first. @throws 404 for an unknown user. */
  async list(username: string): Promise<MinecraftLinkView[]> {
    const user = await this.requireUser(username);
    return (await this.ofUser(user)).map(toView);
  }

  /**
   * Links `uuid` to `username` on behalf of `actor`. Answers `created: false` when it is linked to
   * that user already. @throws 404 unknown user, 409 MINECRAFT_ACCOUNT_LINKED when another user
   * holds the account, 409 MINECRAFT_LINKS_MAX when the user has {@link minecraftLinksPerUserMax}.
   */
  link(username: string, uuid: string, actor: string): Promise<{ link: MinecraftLinkView; created: boolean }> {
    const id = canonicalMinecraftUuid(uuid);
    return this.writes.run(DIRECTORY_LOCK, async () => {
      const user = await this.requireUser(username);
      const existing = await this.links.get(id);
      if (existing) {
        if (existing.userId === user._id) return { link: toView(existing), created: false };
        const holder = await this.users.findById(existing.userId);
        if (holder) throw conflict(`Minecraft account ${id} is linked to another user`, "MINECRAFT_ACCOUNT_LINKED");
        // The link of a deleted user (its removal did not finish): the account is free.
        await this.links.delete(id);
      }
      if ((await this.ofUser(user)).length >= minecraftLinksPerUserMax) {
        throw conflict(`User ${user.username} already links ${minecraftLinksPerUserMax} Minecraft accounts; unlink one first`, "MINECRAFT_LINKS_MAX");
      }
      const doc: LinkDoc = { _id: id, userId: user._id, username: user.username, linkedAt: new Date(this.clock.nowMs()).toISOString(), linkedBy: actor };
      await this.links.insert(doc);
      return { link: toView(doc), created: true };
    });
  }

  /** Unlinks `uuid` from `username`. @throws 404 when the user is unknown or does not link that account. */
  unlink(username: string, uuid: string): Promise<MinecraftLinkView> {
    const id = canonicalMinecraftUuid(uuid);
    return this.writes.run(DIRECTORY_LOCK, async () => {
      const user = await this.requireUser(username);
      const existing = await this.links.get(id);
      if (!existing || existing.userId !== user._id) throw notFound(`User ${user.username} does not link Minecraft account ${id}`, "MINECRAFT_LINK_NOT_FOUND");
      await this.links.delete(id);
      return toView(existing);
    });
  }

  /** Removes every link of a deleted user (its `_id`); the accounts are free again. */
  async removeUser(userId: string): Promise<number> {
    return this.writes.run(DIRECTORY_LOCK, () => this.links.deleteMany({ userId }));
  }

  /**
   * The permissions of the user `uuid` is linked to, read now (no cache): an account that is not
   * linked, or whose user is gone, holds none. A malformed UUID holds none either.
   */
  async permissionsOf(uuid: string): Promise<AccountPermissions> {
    const id = uuid.toLowerCase();
    const none: AccountPermissions = { uuid: id, linked: false, permissions: new Set() };
    if (!UUID_REGEX.test(id)) return none;
    const link = await this.links.get(id);
    if (!link) return none;
    const user = await this.users.findById(link.userId);
    if (!user) return none;
    return { uuid: id, linked: true, permissions: await this.roles.permissionsOf(user.roles) };
  }

  /** Whether the user linked to `uuid` holds `permission`; false for an account that is not linked. */
  async hasPermission(uuid: string, permission: string): Promise<boolean> {
    return (await this.permissionsOf(uuid)).permissions.has(permission);
  }

  private ofUser(user: UserDoc): Promise<LinkDoc[]> {
    return this.links.find({ userId: user._id }, { sort: { field: "linkedAt", direction: 1 } });
  }

  private async requireUser(username: string): Promise<UserDoc> {
    const user = await this.users.findByUsername(username);
    if (!user) throw notFound(`User not found: ${username}`);
    return user;
  }
}

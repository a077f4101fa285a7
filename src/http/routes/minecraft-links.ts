/**
 * Minecraft account links (docs/decisions/accounts.md), audited as `user.minecraft.link` and
 * `user.minecraft.unlink` (resource: the user; details: the account's UUID):
 * - one's own: `GET|POST /api/v1/auth/me/minecraft`, `DELETE /api/v1/auth/me/minecraft/{uuid}`
 *   (reading needs no permission, changing needs `minecraft.link`: OPERATOR and ADMIN by default);
 * - anyone's: `GET|POST /api/v1/users/{username}/minecraft`, `DELETE .../minecraft/{uuid}`
 *   (`users.manage`, ADMIN only by default).
 * And the plugin's check, `GET /api/plugin/players/{uuid}/permissions[/{permission}]` (workload
 * token), which `CloudCommandSender.hasPermission` of a player asks: an account that is not linked
 * holds nothing.
 */
import { Hono } from "hono";
import { Type } from "@sinclair/typebox";
import type { AuditRecorder } from "../../audit/types.js";
import type { AuthService } from "../../auth/auth-service.js";
import { MINECRAFT_UUID_PATTERN, type MinecraftLinkView } from "../../auth/minecraft-links.js";
import type { Principal } from "../../auth/principal.js";
import { assert } from "../../shared/errors.js";
import { audited } from "../audited.js";
import { addRoute, type RouteDef, type RouteModule } from "../route.js";
import type { AppContext, AppEnv } from "../types.js";

export const MinecraftLinkSchema = Type.Object({
  uuid: Type.String(),
  username: Type.String(),
  linkedAt: Type.String({ format: "date-time" }),
  linkedBy: Type.String(),
});

const MinecraftUuid = Type.String({ pattern: MINECRAFT_UUID_PATTERN });
export const LinkMinecraftSchema = Type.Object({ uuid: MinecraftUuid }, { additionalProperties: false });
const UserParams = Type.Object({ username: Type.String() });
const UserUuidParams = Type.Object({ username: Type.String(), uuid: MinecraftUuid });
const UuidParams = Type.Object({ uuid: MinecraftUuid });
/** A permission a plugin asks about: printable, without spaces, at most 128 characters. */
const PermissionNode = Type.String({ minLength: 1, maxLength: 128, pattern: "^[!-~]+$" });

export const AccountPermissionsSchema = Type.Object({
  uuid: Type.String(),
  linked: Type.Boolean(),
  permissions: Type.Array(Type.String()),
});
export const PermissionCheckSchema = Type.Object({ uuid: Type.String(), permission: Type.String(), allowed: Type.Boolean() });

const userOf = (principal: Principal | null): string => {
  assert(principal?.kind === "user", "a user route reached without a user principal");
  return principal.username;
};

/** Mounts the link routes and the plugin's permission check. */
export const minecraftLinkRoutes =
  (deps: { auth: AuthService; audit: AuditRecorder }): RouteModule =>
  (app, registry) => {
    const links = deps.auth.links;
    const sub = new Hono<AppEnv>();
    const link = async (c: AppContext, username: string, uuid: string, actor: string) => {
      const { link: made, created } = await links.link(username, uuid, actor);
      if (created) await audited(deps.audit, c, { action: "user.minecraft.link", resourceType: "user", resourceId: username, details: { uuid: made.uuid } });
      return c.json(made, created ? 201 : 200);
    };
    const unlink = async (c: AppContext, username: string, uuid: string) => {
      const removed: MinecraftLinkView = await links.unlink(username, uuid);
      await audited(deps.audit, c, { action: "user.minecraft.unlink", resourceType: "user", resourceId: username, details: { uuid: removed.uuid } });
      return c.body(null, 204);
    };
    const self = { tag: "users" } as const;
    const admin = { tag: "users", permission: "users.manage" } as const;
    const list = { response: Type.Array(MinecraftLinkSchema) } satisfies Partial<RouteDef>;
    const linkDef = { body: LinkMinecraftSchema, response: MinecraftLinkSchema, successStatus: 201 } satisfies Partial<RouteDef>;

    addRoute(
      sub,
      registry,
      { ...self, ...list, method: "get", path: "/api/v1/auth/me/minecraft", summary: "The Minecraft accounts the signed-in user linked" },
      ({ principal }) => links.list(userOf(principal)),
    );
    addRoute(
      sub,
      registry,
      {
        ...self,
        ...linkDef,
        method: "post",
        path: "/api/v1/auth/me/minecraft",
        permission: "minecraft.link",
        summary: "Links a Minecraft account to the signed-in user (201; 200 when it is linked already; 409 when another user holds it)",
      },
      ({ body, principal, c }) => link(c, userOf(principal), body.uuid, userOf(principal)),
    );
    addRoute(
      sub,
      registry,
      {
        ...self,
        method: "delete",
        path: "/api/v1/auth/me/minecraft/:uuid",
        permission: "minecraft.link",
        params: UuidParams,
        successStatus: 204,
        summary: "Unlinks one of the signed-in user's Minecraft accounts; its in-game permissions end at once",
      },
      ({ params, principal, c }) => unlink(c, userOf(principal), params.uuid),
    );
    addRoute(
      sub,
      registry,
      { ...admin, ...list, method: "get", path: "/api/v1/users/:username/minecraft", params: UserParams, summary: "The Minecraft accounts a user linked" },
      ({ params }) => links.list(params.username),
    );
    addRoute(
      sub,
      registry,
      {
        ...admin,
        ...linkDef,
        method: "post",
        path: "/api/v1/users/:username/minecraft",
        params: UserParams,
        summary: "Links a Minecraft account to a user (201; 200 when it is linked already; 409 when another user holds it)",
      },
      ({ params, body, principal, c }) => link(c, params.username, body.uuid, userOf(principal)),
    );
    addRoute(
      sub,
      registry,
      {
        ...admin,
        method: "delete",
        path: "/api/v1/users/:username/minecraft/:uuid",
        params: UserUuidParams,
        successStatus: 204,
        summary: "Unlinks a Minecraft account from a user; its in-game permissions end at once",
      },
      ({ params, c }) => unlink(c, params.username, params.uuid),
    );

    const plugin = { tag: "Plugin", auth: "workload" } as const;
    addRoute(
      sub,
      registry,
      {
        ...plugin,
        method: "get",
        path: "/api/plugin/players/:uuid/permissions",
        params: UuidParams,
        response: AccountPermissionsSchema,
        summary: "The permissions of the user a Minecraft account is linked to (none when it is not linked), read now",
      },
      async ({ params }) => {
        const found = await links.permissionsOf(params.uuid);
        return { uuid: found.uuid, linked: found.linked, permissions: [...found.permissions] };
      },
    );
    addRoute(
      sub,
      registry,
      {
        ...plugin,
        method: "get",
        path: "/api/plugin/players/:uuid/permissions/:permission",
        params: Type.Object({ uuid: MinecraftUuid, permission: PermissionNode }),
        response: PermissionCheckSchema,
        summary: "Whether the user a Minecraft account is linked to holds one permission (false when it is not linked)",
      },
      async ({ params }) => ({
        uuid: params.uuid.toLowerCase(),
        permission: params.permission,
        allowed: await links.hasPermission(params.uuid, params.permission),
      }),
    );
    app.route("/", sub);
  };

/** User management under `/api/v1/users` (permission users.manage), audited as user.create/update/delete. */
import { Hono } from "hono";
import { Type } from "@sinclair/typebox";
import type { AuditRecorder } from "../../audit/types.js";
import type { AuthService } from "../../auth/auth-service.js";
import { PASSWORD_LENGTH_MAX, PASSWORD_LENGTH_MIN, USERNAME_PATTERN } from "../../auth/user-directory.js";
import { audited } from "../audited.js";
import { addRoute, type RouteModule } from "../route.js";
import type { AppEnv } from "../types.js";

export const UserSchema = Type.Object({
  username: Type.String(),
  roles: Type.Array(Type.String()),
  createdAt: Type.String({ format: "date-time" }),
  updatedAt: Type.String({ format: "date-time" }),
});

const RoleNames = Type.Array(Type.String({ maxLength: 64 }), { maxItems: 64 });

export const CreateUserSchema = Type.Object({
  username: Type.String({ pattern: USERNAME_PATTERN }),
  password: Type.String({ minLength: PASSWORD_LENGTH_MIN, maxLength: PASSWORD_LENGTH_MAX }),
  roles: RoleNames,
});

export const UpdateUserSchema = Type.Object({
  password: Type.Optional(Type.String({ minLength: PASSWORD_LENGTH_MIN, maxLength: PASSWORD_LENGTH_MAX })),
  roles: Type.Optional(RoleNames),
});

const UsernameParams = Type.Object({ username: Type.String() });

export const userRoutes =
  (deps: { auth: AuthService; audit: AuditRecorder }): RouteModule =>
  (app, registry) => {
    const users = deps.auth.users;
    const sub = new Hono<AppEnv>();
    const base = { tag: "users", permission: "users.manage" } as const;
    addRoute(sub, registry, { ...base, method: "get", path: "/api/v1/users", summary: "List users", response: Type.Array(UserSchema) }, () => users.list());
    addRoute(
      sub,
      registry,
      { ...base, method: "get", path: "/api/v1/users/:username", summary: "Get a user", params: UsernameParams, response: UserSchema },
      ({ params }) => users.get(params.username),
    );
    addRoute(
      sub,
      registry,
      {
        ...base,
        method: "post",
        path: "/api/v1/users",
        summary: "Create a user",
        body: CreateUserSchema,
        response: UserSchema,
        successStatus: 201,
      },
      async ({ body, c }) => {
        const created = await users.create(body);
        deps.auth.invalidate();
        await audited(deps.audit, c, { action: "user.create", resourceType: "user", resourceId: created.username, after: created });
        return created;
      },
    );
    addRoute(
      sub,
      registry,
      {
        ...base,
        method: "patch",
        path: "/api/v1/users/:username",
        summary: "Change a user's password or roles; a password change revokes the user's tokens",
        params: UsernameParams,
        body: UpdateUserSchema,
        response: UserSchema,
      },
      async ({ params, body, c }) => {
        const { before, after } = await users.update(params.username, { password: body.password, roles: body.roles });
        deps.auth.invalidate();
        const details = { passwordChanged: body.password !== undefined };
        await audited(deps.audit, c, { action: "user.update", resourceType: "user", resourceId: after.username, details, before, after });
        return after;
      },
    );
    addRoute(
      sub,
      registry,
      {
        ...base,
        method: "delete",
        path: "/api/v1/users/:username",
        summary: "Delete a user (not oneself, not the last ADMIN)",
        params: UsernameParams,
        successStatus: 204,
      },
      async ({ params, principal, c }) => {
        const userId = (await users.findByUsername(params.username))?._id;
        const before = await users.delete(params.username, principal!.username);
        // Its Minecraft accounts are free again (a link names the user's id, so none would act for a namesake anyway).
        if (userId) await deps.auth.links.removeUser(userId);
        deps.auth.invalidate();
        await audited(deps.audit, c, { action: "user.delete", resourceType: "user", resourceId: before.username, before });
        return c.body(null, 204);
      },
    );
    app.route("/", sub);
  };

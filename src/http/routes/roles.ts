/** Role management under `/api/v1/roles` (permission roles.manage), audited as role.create/update/delete. */
import { Hono } from "hono";
import { Type } from "@sinclair/typebox";
import type { AuditRecorder } from "../../audit/types.js";
import type { AuthService } from "../../auth/auth-service.js";
import { ROLE_NAME_PATTERN } from "../../auth/role-directory.js";
import { audited } from "../audited.js";
import { addRoute, type RouteModule } from "../route.js";
import type { AppEnv } from "../types.js";

export const RoleSchema = Type.Object({
  name: Type.String(),
  description: Type.String(),
  permissions: Type.Array(Type.String()),
  builtIn: Type.Boolean(),
});

const Permissions = Type.Array(Type.String({ maxLength: 128 }), { maxItems: 256 });
const Description = Type.String({ maxLength: 1024 });

export const CreateRoleSchema = Type.Object({
  name: Type.String({ pattern: ROLE_NAME_PATTERN }),
  description: Type.Optional(Description),
  permissions: Permissions,
});

export const UpdateRoleSchema = Type.Object({
  description: Type.Optional(Description),
  permissions: Type.Optional(Permissions),
});

const NameParams = Type.Object({ name: Type.String() });

export const roleRoutes =
  (deps: { auth: AuthService; audit: AuditRecorder }): RouteModule =>
  (app, registry) => {
    const roles = deps.auth.roles;
    const sub = new Hono<AppEnv>();
    const base = { tag: "roles", permission: "roles.manage" } as const;
    addRoute(
      sub,
      registry,
      { ...base, method: "get", path: "/api/v1/roles", summary: "List built-in and custom roles", response: Type.Array(RoleSchema) },
      () => roles.list(),
    );
    addRoute(
      sub,
      registry,
      { ...base, method: "get", path: "/api/v1/roles/:name", summary: "Get a role", params: NameParams, response: RoleSchema },
      ({ params }) => roles.get(params.name),
    );
    addRoute(
      sub,
      registry,
      {
        ...base,
        method: "post",
        path: "/api/v1/roles",
        summary: "Create a custom role",
        body: CreateRoleSchema,
        response: RoleSchema,
        successStatus: 201,
      },
      async ({ body, c }) => {
        const created = await roles.create(body);
        deps.auth.invalidate();
        await audited(deps.audit, c, { action: "role.create", resourceType: "role", resourceId: created.name, after: created });
        return created;
      },
    );
    addRoute(
      sub,
      registry,
      {
        ...base,
        method: "patch",
        path: "/api/v1/roles/:name",
        summary: "Change a custom role (built-in roles answer 400 PROTECTED)",
        params: NameParams,
        body: UpdateRoleSchema,
        response: RoleSchema,
      },
      async ({ params, body, c }) => {
        const { before, after } = await roles.update(params.name, { description: body.description, permissions: body.permissions });
        deps.auth.invalidate();
        await audited(deps.audit, c, { action: "role.update", resourceType: "role", resourceId: after.name, before, after });
        return after;
      },
    );
    addRoute(
      sub,
      registry,
      {
        ...base,
        method: "delete",
        path: "/api/v1/roles/:name",
        summary: "Delete a custom role no user holds",
        params: NameParams,
        successStatus: 204,
      },
      async ({ params, c }) => {
        const before = await roles.delete(params.name, (role) => deps.auth.users.holdsRole(role));
        deps.auth.invalidate();
        await audited(deps.audit, c, { action: "role.delete", resourceType: "role", resourceId: before.name, before });
        return c.body(null, 204);
      },
    );
    app.route("/", sub);
  };

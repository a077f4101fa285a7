/**
 * The in-server plugin's routes (spec document 3, "Plugin REST", prefix /api/plugin), authenticated
 * by the instance's workload token: ready, player join and leave, and token refresh.
 */
import type { Hono } from "hono";
import { Type } from "@sinclair/typebox";
import type { InstanceService } from "../../domain/instances/instance-service.js";
import type { MachineCredentials } from "../../plugin-api/credentials.js";
import type { PlayerService } from "../../plugin-api/players.js";
import { assert, badRequest, notFound } from "../../shared/errors.js";
import { addRoute, type RouteRegistry } from "../route.js";
import type { Principal } from "../../auth/principal.js";
import type { AppEnv } from "../types.js";

const tag = "Plugin";
/** RFC 4122 textual form (any version: offline-mode servers derive version 3 UUIDs). */
const UUID_PATTERN = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";
const Uuid = Type.String({ pattern: UUID_PATTERN });
const PlayerName = Type.String({ minLength: 1, maxLength: 32, pattern: "^[^\\x00-\\x1f]+$" });

/** What the routes need of the scheduler. */
export interface PluginOperations {
  markReady(instanceId: string): Promise<void>;
}

export interface PluginRouteDeps {
  instances: InstanceService;
  players: PlayerService;
  credentials: MachineCredentials;
  operations: PluginOperations;
}

function instanceOf(principal: Principal | null): string {
  assert(principal?.kind === "workload" && principal.instanceId, "workload route reached without a workload principal");
  return principal.instanceId;
}

/** Mounts /api/plugin/ready, /player-join, /player-leave and /auth/refresh. */
export function pluginRoutes(deps: PluginRouteDeps): (app: Hono<AppEnv>, registry: RouteRegistry) => void {
  return (app, registry) => {
    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/plugin/ready",
        summary: "The server finished starting: the instance becomes RUNNING",
        tag,
        auth: "workload",
        body: Type.Object({}),
        response: Type.Object({ instanceId: Type.String(), ready: Type.Boolean() }),
      },
      async ({ principal }) => {
        const instanceId = instanceOf(principal);
        await deps.operations.markReady(instanceId);
        return { instanceId, ready: true };
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/plugin/player-join",
        summary: "A player joined this instance",
        tag,
        auth: "workload",
        body: Type.Object({ uuid: Uuid, name: PlayerName, group: Type.Optional(Type.String({ maxLength: 256 })) }),
        response: Type.Object({ instanceId: Type.String(), playerCount: Type.Integer() }),
      },
      async ({ principal, body }) => {
        const instanceId = instanceOf(principal);
        const instance = await deps.instances.get(instanceId);
        if (body.group && body.group !== instance.group) throw badRequest(`group: this instance belongs to ${instance.group}, not ${body.group}`);
        const playerCount = await deps.players.join({ instanceId, group: instance.group }, body.uuid.toLowerCase(), body.name);
        return { instanceId, playerCount };
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/plugin/player-leave",
        summary: "A player left this instance",
        tag,
        auth: "workload",
        body: Type.Object({ uuid: Uuid }),
        response: Type.Object({ instanceId: Type.String(), left: Type.Boolean() }),
      },
      async ({ principal, body }) => {
        const instanceId = instanceOf(principal);
        if (!(await deps.players.leave(instanceId, body.uuid.toLowerCase()))) throw notFound(`Player ${body.uuid} is not on instance ${instanceId}`);
        return { instanceId, left: true };
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/plugin/auth/refresh",
        summary: "A fresh workload token for this instance",
        tag,
        auth: "workload",
        response: Type.Object({ token: Type.String(), expiresAt: Type.String({ format: "date-time" }) }),
      },
      async ({ principal }) => {
        const instance = await deps.instances.get(instanceOf(principal));
        const issued = deps.credentials.issueWorkloadToken({ instanceId: instance.id, group: instance.group, node: instance.node });
        return { token: issued.token, expiresAt: new Date(issued.expiresAtMs).toISOString() };
      },
    );
  };
}

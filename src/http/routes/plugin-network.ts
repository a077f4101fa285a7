/**
 * The plugin routes that look at the network (spec document 3, "Plugin REST"): the backend
 * instances, the groups, the players online, and transfers of a player to an instance or to the
 * least-loaded RUNNING instance of a group. A transfer is queued and delivered to the instance
 * holding the player (plugin-api/transfers.ts); the answer (202) means queued, not arrived.
 */
import type { Hono } from "hono";
import { Type } from "@sinclair/typebox";
import type { GroupService } from "../../domain/groups/group-service.js";
import type { InstanceService } from "../../domain/instances/instance-service.js";
import { FINISHED_STATES, InstanceListItemSchema } from "../../domain/instances/instance-schemas.js";
import { TransferTargets } from "../../plugin-api/transfer-targets.js";
import { GroupListItemSchema } from "../../domain/groups/group-schemas.js";
import type { PlayerService } from "../../plugin-api/players.js";
import type { SequenceGuard } from "../../plugin-api/sequence-guard.js";
import type { Transfer, TransferService } from "../../plugin-api/transfers.js";
import { addRoute, type RouteRegistry } from "../route.js";
import type { AppEnv } from "../types.js";
import { checkSequence, workloadOf } from "./plugin-context.js";

const tag = "Plugin";

export interface PluginNetworkRouteDeps {
  instances: InstanceService;
  groups: Pick<GroupService, "getDoc" | "list" | "listDocs">;
  players: PlayerService;
  transfers: TransferService;
  sequences: SequenceGuard;
}

const Nullable = <T extends ReturnType<typeof Type.String>>(schema: T) => Type.Union([schema, Type.Null()]);

/** A player as `GET /api/plugin/players` lists it. */
export const OnlinePlayerSchema = Type.Object({
  uuid: Type.String(),
  name: Type.String(),
  instanceId: Nullable(Type.String()),
  group: Nullable(Type.String()),
  proxyInstanceId: Nullable(Type.String()),
  connectedAt: Type.String({ format: "date-time" }),
  instanceSince: Nullable(Type.String({ format: "date-time" })),
});

/** A transfer as the transfer routes answer it and the plugin event stream sends it. */
export const TransferSchema = Type.Object({
  id: Type.String(),
  playerUuid: Type.String(),
  playerName: Type.String(),
  fromInstanceId: Nullable(Type.String()),
  targetInstanceId: Type.String(),
  targetGroup: Nullable(Type.String()),
  holderInstanceId: Type.String(),
  requestedBy: Type.String(),
  requestedAt: Type.String({ format: "date-time" }),
  state: Type.Union([Type.Literal("PENDING"), Type.Literal("COMPLETED"), Type.Literal("FAILED")]),
  failureReason: Nullable(Type.String()),
});

/** Mounts /api/plugin/instances, /groups, /players, /transfer and /transfer-to-group. */
export function pluginNetworkRoutes(deps: PluginNetworkRouteDeps): (app: Hono<AppEnv>, registry: RouteRegistry) => void {
  const targets = new TransferTargets(deps);

  return (app, registry) => {
    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/plugin/instances",
        summary: "The backend (non-proxy) instances that are not finished",
        tag,
        auth: "workload",
        response: Type.Array(InstanceListItemSchema),
      },
      async () => {
        const [instances, proxies] = await Promise.all([deps.instances.list(), targets.proxyGroups()]);
        return instances.filter((i) => !FINISHED_STATES.has(i.state) && !proxies.has(i.group));
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/plugin/groups",
        summary: "The groups with their running instances and online players (group list records)",
        tag,
        auth: "workload",
        response: Type.Array(GroupListItemSchema),
      },
      () => deps.groups.list(),
    );

    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/plugin/players",
        summary: "The players online across the network",
        tag,
        auth: "workload",
        response: Type.Array(OnlinePlayerSchema),
      },
      () => deps.players.list(),
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/plugin/transfer",
        summary: "Queues a move of a player to an instance: 202 queued; 400 bad UUID; 404 player or target missing; 409 target not RUNNING or already there",
        tag,
        auth: "workload",
        body: Type.Object({ playerUuid: Type.String({ maxLength: 64 }), targetInstanceId: Type.String({ minLength: 1, maxLength: 128 }) }),
        invalidBodyStatus: 400,
        response: TransferSchema,
        successStatus: 202,
      },
      async ({ principal, body, c }) => {
        const workload = workloadOf(principal);
        const target = await targets.toInstance(body.playerUuid, body.targetInstanceId);
        await checkSequence(c, workload, deps.sequences);
        return toWire(await deps.transfers.request(target.player, target.targetInstanceId, null, workload.instanceId));
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/plugin/transfer-to-group",
        summary: "Queues a move of a player to the least-loaded RUNNING instance of a group: 202; 400 bad UUID; 404 player or group missing; 409 none running",
        tag,
        auth: "workload",
        body: Type.Object({ playerUuid: Type.String({ maxLength: 64 }), group: Type.String({ minLength: 1, maxLength: 128 }) }),
        invalidBodyStatus: 400,
        response: TransferSchema,
        successStatus: 202,
      },
      async ({ principal, body, c }) => {
        const workload = workloadOf(principal);
        const target = await targets.toGroup(body.playerUuid, body.group);
        await checkSequence(c, workload, deps.sequences);
        return toWire(await deps.transfers.request(target.player, target.targetInstanceId, target.targetGroup, workload.instanceId));
      },
    );
  };
}

const toWire = (transfer: Transfer) => ({ ...transfer });

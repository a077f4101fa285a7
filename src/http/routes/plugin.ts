/**
 * The in-server plugin's routes (spec document 3, "Plugin REST", prefix /api/plugin), authenticated
 * by the instance's workload token: readiness, players, token rotation, the event-stream ticket,
 * custom events, metrics and messages. The network routes (instances, groups, players, transfers)
 * are in plugin-network.ts. Every POST checks `X-Cloud-Sequence` after its body and before any
 * change (plugin-context.ts).
 */
import type { Hono } from "hono";
import { Type, type Static } from "@sinclair/typebox";
import type { GroupService } from "../../domain/groups/group-service.js";
import type { InstanceService } from "../../domain/instances/instance-service.js";
import type { Tickets } from "../../coordination/tickets.js";
import { CUSTOM_EVENT_TYPE_PATTERN } from "../../events/event-types.js";
import type { EventStreamTicket } from "../../events/types.js";
import type { EventBus } from "../../events/types.js";
import type { MachineCredentials } from "../../plugin-api/credentials.js";
import type { InstanceMetricsService } from "../../plugin-api/instance-metrics.js";
import { isProxyPlatform, type PlayerService } from "../../plugin-api/players.js";
import type { SequenceGuard } from "../../plugin-api/sequence-guard.js";
import type { PlayerAdmission } from "../../plugin-api/admission.js";
import type { MetricsPayload, WorldMetrics } from "../../sdk/contracts/plugin-metrics.js";
import type { AssertNever, KeysDiffer } from "../../sdk/contracts/type-checks.js";
import { ApiError, badRequest, notFound, validationError, unauthorized } from "../../shared/errors.js";
import { addRoute, type RouteRegistry } from "../route.js";
import type { AppEnv } from "../types.js";
import { checkSequence, traceContext, workloadOf } from "./plugin-context.js";

const tag = "Plugin";
/** RFC 4122 textual form (any version: offline-mode servers derive version 3 UUIDs). */
export const UUID_PATTERN = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";
export const Uuid = Type.String({ pattern: UUID_PATTERN });
export const PlayerName = Type.String({ minLength: 1, maxLength: 32, pattern: "^[^\\x00-\\x1f]+$" });
/** Serialized size of a custom event's data (the journal keeps 2,048 events on every controller). */
export const customEventDataCharsMax = 32_768;
/** Longest chat message `message/send` accepts. */
export const messageContentCharsMax = 4_096;

/** What the routes need of the scheduler. */
export interface PluginOperations {
  markReady(instanceId: string): Promise<void>;
}

export interface PluginRouteDeps {
  instances: InstanceService;
  groups: Pick<GroupService, "getDoc">;
  players: PlayerService;
  credentials: MachineCredentials;
  operations: PluginOperations;
  sequences: SequenceGuard;
  events: EventBus;
  metrics: InstanceMetricsService;
  /** The event stream's tickets (`kind: "plugin-events"`); null when this controller has no stream. */
  eventTickets: Tickets<EventStreamTicket> | null;
  /** Who may join (maintenance); absent: every join is taken. */
  admission?: PlayerAdmission;
}

const Count = Type.Number({ minimum: 0, maximum: 1e15 });
const Rate = Type.Number({ minimum: 0, maximum: 1e6 });
const Int = Type.Integer({ minimum: 0, maximum: 2_147_483_647 });

/** The metrics payload of spec document 3 (`src/sdk/contracts/plugin-metrics.ts`); every field optional, unknown fields ignored. */
export const MetricsPayloadSchema = Type.Object({
  tps1m: Type.Optional(Rate),
  tps5m: Type.Optional(Rate),
  tps15m: Type.Optional(Rate),
  msptAvg: Type.Optional(Rate),
  heapUsedMb: Type.Optional(Count),
  heapMaxMb: Type.Optional(Count),
  heapCommittedMb: Type.Optional(Count),
  gcCollections: Type.Optional(Count),
  gcTimeMs: Type.Optional(Count),
  threadCount: Type.Optional(Int),
  daemonThreadCount: Type.Optional(Int),
  playerCount: Type.Optional(Int),
  maxPlayers: Type.Optional(Int),
  worldCount: Type.Optional(Int),
  totalEntities: Type.Optional(Count),
  totalChunks: Type.Optional(Count),
  worlds: Type.Optional(
    Type.Array(
      Type.Object({
        name: Type.String({ maxLength: 256 }),
        environment: Type.Optional(Type.String({ maxLength: 64 })),
        entityCount: Type.Optional(Count),
        chunkCount: Type.Optional(Count),
        playerCount: Type.Optional(Int),
      }),
      { maxItems: 256 },
    ),
  ),
  serverVersion: Type.Optional(Type.String({ maxLength: 256 })),
  pluginCount: Type.Optional(Int),
  uptimeMs: Type.Optional(Count),
});
type MetricsBody = Static<typeof MetricsPayloadSchema>;
/** Compile-time only: the schema names exactly the fields of the payload and of its worlds. */
export type MetricsSchemaIsThePayload = AssertNever<
  KeysDiffer<MetricsBody, MetricsPayload> | KeysDiffer<NonNullable<MetricsBody["worlds"]>[number], WorldMetrics>
>;

/** Mounts the plugin routes of this file (and the trace-context middleware of every plugin route). */
export function pluginRoutes(deps: PluginRouteDeps): (app: Hono<AppEnv>, registry: RouteRegistry) => void {
  return (app, registry) => {
    app.use("/api/plugin/*", traceContext());

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
      async ({ principal, c }) => {
        const workload = workloadOf(principal);
        await checkSequence(c, workload, deps.sequences);
        await deps.operations.markReady(workload.instanceId);
        return { instanceId: workload.instanceId, ready: true };
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/plugin/player-join",
        summary:
          "A player joined this instance (a proxy: the player came onto the network through it); 403 MAINTENANCE or GROUP_MAINTENANCE refuses the player",
        tag,
        auth: "workload",
        body: Type.Object({
          uuid: Uuid,
          name: PlayerName,
          group: Type.Optional(Type.String({ maxLength: 256 })),
          /** A player this instance already holds, reported again after the registry lost it: never refused. */
          rejoin: Type.Optional(Type.Boolean()),
        }),
        response: Type.Object({ instanceId: Type.String(), playerCount: Type.Integer() }),
      },
      async ({ principal, body, c }) => {
        const workload = workloadOf(principal);
        const instance = await deps.instances.get(workload.instanceId);
        if (body.group && body.group !== instance.group) throw badRequest(`group: this instance belongs to ${instance.group}, not ${body.group}`);
        const groupDoc = await deps.groups.getDoc(instance.group);
        const proxy = groupDoc !== null && isProxyPlatform(groupDoc.platform);
        const uuid = body.uuid.toLowerCase();
        if (deps.admission && body.rejoin !== true) {
          const target = { instanceId: instance.id, proxy, group: instance.group, groupMaintenance: groupDoc?.maintenance ?? false };
          await deps.admission.check(target, uuid, body.name, await deps.players.get(uuid));
        }
        await checkSequence(c, workload, deps.sequences);
        const playerCount = await deps.players.join({ instanceId: instance.id, group: instance.group, proxy }, uuid, body.name);
        return { instanceId: instance.id, playerCount };
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/plugin/player-leave",
        summary: "A player left this instance (a proxy: the player left the network)",
        tag,
        auth: "workload",
        body: Type.Object({ uuid: Uuid }),
        response: Type.Object({ instanceId: Type.String(), left: Type.Boolean() }),
      },
      async ({ principal, body, c }) => {
        const workload = workloadOf(principal);
        await checkSequence(c, workload, deps.sequences);
        if (!(await deps.players.leave(workload.instanceId, body.uuid.toLowerCase())))
          throw notFound(`Player ${body.uuid} is not on instance ${workload.instanceId}`);
        return { instanceId: workload.instanceId, left: true };
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/plugin/auth/refresh",
        summary: "Rotates the workload token: a new one; the presented one stops working after a 10 s grace",
        tag,
        auth: "workload",
        response: Type.Object({ token: Type.String(), expiresAt: Type.String({ format: "date-time" }) }),
      },
      async ({ principal, c }) => {
        const workload = workloadOf(principal);
        await checkSequence(c, workload, deps.sequences);
        const issued = await deps.credentials.rotateWorkloadToken(workload);
        // Revoked or rotated out between the check of the token and the rotation.
        if (!issued) throw unauthorized("Invalid or expired token");
        return { token: issued.token, expiresAt: new Date(issued.expiresAtMs).toISOString() };
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/plugin/events/ticket",
        summary: "A single-use ticket (30 s) for this instance's plugin event stream (GET /api/v1/events/stream?ticket=…); 503 when unavailable",
        tag,
        auth: "workload",
        response: Type.Object({ ticket: Type.String(), expiresAt: Type.String({ format: "date-time" }) }),
      },
      async ({ principal, c }) => {
        const workload = workloadOf(principal);
        await checkSequence(c, workload, deps.sequences);
        if (!deps.eventTickets) throw unavailable("The event stream is not available on this controller");
        try {
          return await deps.eventTickets.issue({ kind: "plugin-events", username: `instance:${workload.instanceId}`, instanceId: workload.instanceId });
        } catch (err) {
          throw unavailable("The event stream's ticket store cannot be reached", err);
        }
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/plugin/events",
        summary: "Publishes a custom MODULE:ACTION event with this instance as its source",
        tag,
        auth: "workload",
        body: Type.Object({
          type: Type.String({ maxLength: 128, pattern: CUSTOM_EVENT_TYPE_PATTERN.source }),
          data: Type.Optional(Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()])),
        }),
        response: Type.Object({ type: Type.String(), source: Type.String() }),
      },
      async ({ principal, body, c }) => {
        const workload = workloadOf(principal);
        const data = body.data ?? {};
        if (JSON.stringify(data).length > customEventDataCharsMax) throw validationError(`data: larger than ${customEventDataCharsMax} characters as JSON`);
        await checkSequence(c, workload, deps.sequences);
        deps.events.publish(body.type, data, workload.instanceId);
        return { type: body.type, source: workload.instanceId };
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/plugin/metrics",
        summary: "Records this instance's metrics snapshot (INSTANCE_METRICS; GET /api/v1/services/{id}/metrics)",
        tag,
        auth: "workload",
        body: MetricsPayloadSchema,
        response: Type.Object({ instanceId: Type.String(), reportedAt: Type.String({ format: "date-time" }) }),
      },
      async ({ principal, body, c }) => {
        const workload = workloadOf(principal);
        const instance = await deps.instances.get(workload.instanceId);
        await checkSequence(c, workload, deps.sequences);
        const snapshot = await deps.metrics.record({ instanceId: instance.id, group: instance.group }, body);
        return { instanceId: instance.id, reportedAt: snapshot.reportedAt };
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/plugin/message/send",
        summary: "Sends a player message through the messaging module: 201; 400; 403 blocked; 503 while no messaging module is loaded",
        tag,
        auth: "workload",
        body: Type.Object({
          fromUuid: Uuid,
          fromName: PlayerName,
          toUuid: Uuid,
          toName: PlayerName,
          content: Type.String({ minLength: 1, maxLength: messageContentCharsMax }),
          replyToId: Type.Optional(Type.Union([Type.String({ minLength: 1, maxLength: 128 }), Type.Null()])),
        }),
        invalidBodyStatus: 400,
        successStatus: 201,
      },
      async ({ principal, c }) => {
        const workload = workloadOf(principal);
        await checkSequence(c, workload, deps.sequences);
        // Messages are a module's capability; the module system does not exist yet.
        throw unavailable("No messaging module is loaded", undefined, "MESSAGING_UNAVAILABLE");
      },
    );
  };
}

/** Whether the group's instances are proxies (its platform); false for a group that is gone. */
export async function isProxyGroup(groups: Pick<GroupService, "getDoc">, group: string): Promise<boolean> {
  const doc = await groups.getDoc(group);
  return doc !== null && isProxyPlatform(doc.platform);
}

function unavailable(message: string, cause?: unknown, code = "SERVICE_UNAVAILABLE"): ApiError {
  const error = new ApiError(503, code, message);
  if (cause !== undefined) (error as { cause?: unknown }).cause = cause;
  return error;
}

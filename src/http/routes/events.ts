/**
 * The event stream (spec document 3, "Event stream"): `POST /api/v1/events/ticket` gives a signed-in
 * user a single-use ticket (30 s) and `GET /api/v1/events/stream?ticket=…[&lastSequence=N]` streams
 * the cluster's events as Server-Sent Events (frames: `src/events/event-stream.ts`). The resume
 * position is the query's `lastSequence`, else the `Last-Event-ID` header; either must be a
 * non-negative integer, or the request is answered 422 VALIDATION_ERROR (the error envelope) before the ticket
 * is looked at (so a bad request does not use the ticket up). A missing, unknown, expired or used
 * ticket gets one `event: error` with `{"message":"Unauthorized"}` and the stream closes.
 *
 * Both need `events.view`: the ticket route like any route, the stream when it redeems a user's
 * ticket (403 FORBIDDEN in the envelope when the user no longer holds it). Each event then goes only
 * to users who may view its surface, and a user who loses `events.view` is cut off with
 * `event: error` `{"message":"Forbidden"}` (`src/events/event-access.ts`).
 */
import type { Hono } from "hono";
import { Type } from "@sinclair/typebox";
import type { Tickets } from "../../coordination/tickets.js";
import { EVENTS_VIEW, watchStreamAccess, type PermissionsOf } from "../../events/event-access.js";
import { sseFrame, type EventStreamHub, type StreamShape } from "../../events/event-stream.js";
import type { EventStreamTicket } from "../../events/types.js";
import type { Logger } from "../../logs/types.js";
import type { Clock } from "../../shared/clock.js";
import { forbidden, validationError } from "../../shared/errors.js";
import { addRoute, type RouteRegistry } from "../route.js";
import { openSseResponse } from "../sse-response.js";
import type { AppEnv } from "../types.js";

const tag = "Events";

/** Longest accepted sequence text: 15 digits stay below 2^53. */
const SEQUENCE_PATTERN = /^(0|[1-9][0-9]{0,14})$/;

export interface EventRoutesDeps {
  hub: EventStreamHub;
  tickets: Tickets<EventStreamTicket>;
  /** The permissions a ticket's user holds now (checked when the stream opens, and again while it is open). */
  permissionsOf: PermissionsOf;
  clock: Clock;
  logger: Logger;
  /** Serves tickets of `POST /api/plugin/events/ticket`: the plugin event stream of their instance. */
  plugin?: {
    hub: EventStreamHub;
    open(instanceId: string): Promise<{ shape: StreamShape; close(): void }>;
  };
}

/** Reads a resume position; null when absent, a validation error when it is not a sequence. */
export function parseResumePosition(query: string | undefined, header: string | undefined): number | null {
  const [text, where] = query !== undefined ? [query, "lastSequence"] : [header, "Last-Event-ID"];
  if (text === undefined) return null;
  if (!SEQUENCE_PATTERN.test(text)) throw validationError(`${where}: must be a non-negative integer sequence`);
  return Number(text);
}

/** Mounts the ticket and stream routes. */
export function eventRoutes(deps: EventRoutesDeps): (app: Hono<AppEnv>, registry: RouteRegistry) => void {
  return (app, registry) => {
    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/v1/events/ticket",
        summary: "A single-use ticket (30 s) for the event stream",
        tag,
        permission: EVENTS_VIEW,
        response: Type.Object({ ticket: Type.String(), expiresAt: Type.String({ format: "date-time" }) }),
      },
      async ({ principal }) => deps.tickets.issue({ kind: "events", username: principal?.username ?? "unknown" }),
    );

    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/events/stream",
        summary: "SSE stream of the cluster's events (query ticket from POST /api/v1/events/ticket; resume with lastSequence or Last-Event-ID)",
        tag,
        auth: "public",
        query: Type.Object({
          ticket: Type.Optional(Type.String({ maxLength: 256 })),
          lastSequence: Type.Optional(Type.String({ maxLength: 32 })),
        }),
      },
      async ({ query, c }) => {
        const position = parseResumePosition(query.lastSequence, c.req.header("last-event-id"));
        const redeemed = query.ticket ? await deps.tickets.redeem(query.ticket) : null;
        // Any other kind of ticket (a console ticket) is refused here, and used up.
        const ticket = redeemed?.kind === "events" || (redeemed?.kind === "plugin-events" && deps.plugin && redeemed.instanceId) ? redeemed : null;
        // A user's ticket opens the stream only while the user holds events.view.
        const permissions = ticket?.kind === "events" ? await deps.permissionsOf(ticket.username) : null;
        if (ticket?.kind === "events" && !permissions?.has(EVENTS_VIEW)) throw forbidden(`Missing permission: ${EVENTS_VIEW}`);
        if (ticket === null) {
          const { sink, response } = openSseResponse(c);
          sink.write(sseFrame("error", { message: "Unauthorized" }));
          sink.end();
          return response;
        }
        // Opened before the response: a failure here is answered with the error envelope.
        const plugin = ticket.kind === "plugin-events" ? await deps.plugin!.open(ticket.instanceId!) : null;
        const { sink, response } = openSseResponse(c);
        let userShape: StreamShape | undefined;
        let stopAccess = () => {};
        if (ticket.kind === "events") {
          const access = watchStreamAccess({
            username: ticket.username,
            permissions: permissions!,
            permissionsOf: deps.permissionsOf,
            clock: deps.clock,
            onLost: () => {
              sink.write(sseFrame("error", { message: "Forbidden" }));
              sink.end();
            },
            onRefreshFailed: (err) => deps.logger.warn(`Cannot read the permissions of ${ticket.username} for an open event stream`, err),
          });
          stopAccess = () => access.stop();
          userShape = { accept: (entry) => access.accept(entry) };
        }
        const hub = plugin ? deps.plugin!.hub : deps.hub;
        // The stream outlives the handler: the hub writes to the response until the client goes.
        void hub.serve(sink, position, plugin?.shape ?? userShape).finally(() => {
          stopAccess();
          plugin?.close();
        });
        return response;
      },
    );
  };
}

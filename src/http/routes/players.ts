/**
 * Operator routes for the players online (the plugins' own routes are under /api/plugin):
 *
 * - `GET /api/v1/players`: who is where, filtered by `group`, `instance` (the game server or the
 *   proxy holding the player) and `name` (a case-insensitive prefix), keyset-paged in name order
 *   (`{data, pageSize, nextCursor, total}`; the cursor is opaque, and one that is not ours is
 *   400 BAD_CURSOR); permission players.view.
 * - `POST /api/v1/players/{uuid}/transfer` with `targetInstanceId` or `group` (exactly one): queues a
 *   move like the plugins' transfer routes, with the same checks (plugin-api/transfer-targets.ts);
 *   202 with the transfer, which names the operator as `requestedBy`; audited as `player.transfer`;
 *   permission players.transfer.
 */
import type { Hono } from "hono";
import { Type } from "@sinclair/typebox";
import type { AuditRecorder } from "../../audit/types.js";
import type { OnlinePlayer, PlayerService } from "../../plugin-api/players.js";
import type { TransferTargets } from "../../plugin-api/transfer-targets.js";
import type { TransferService } from "../../plugin-api/transfers.js";
import { badRequest, validationError } from "../../shared/errors.js";
import { audited } from "../audited.js";
import { KeysetPageSchema, keysetPage, PAGE_SIZE_DEFAULT, PageSizeQuery } from "../keyset.js";
import { addRoute, type RouteRegistry } from "../route.js";
import type { AppEnv } from "../types.js";
import { OnlinePlayerSchema, TransferSchema } from "./plugin-network.js";

const tag = "Players";

export interface PlayerRoutesDeps {
  players: Pick<PlayerService, "list">;
  targets: TransferTargets;
  transfers: Pick<TransferService, "request">;
  audit: AuditRecorder;
}

const ListQuery = Type.Object({
  group: Type.Optional(Type.String({ maxLength: 256 })),
  instance: Type.Optional(Type.String({ maxLength: 256, description: "The game server or the proxy the player is on" })),
  name: Type.Optional(Type.String({ maxLength: 64, description: "Case-insensitive prefix of the player name" })),
  pageSize: Type.Optional(PageSizeQuery),
  cursor: Type.Optional(Type.String({ maxLength: 512, description: "nextCursor of the previous page; blank for the first page" })),
});

const TransferBody = Type.Object({
  targetInstanceId: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
  group: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
});

/** The sort key: name case-folded, then UUID (names are not unique across time). */
const keyOf = (player: OnlinePlayer): string => `${player.name.toLowerCase()}\u0000${player.uuid}`;

/** The opaque cursor of a key, and back (null when the text is not a cursor of ours). */
export const encodePlayerCursor = (key: string): string => Buffer.from(key, "utf8").toString("base64url");
export function decodePlayerCursor(cursor: string): string | null {
  if (!/^[A-Za-z0-9_-]+$/.test(cursor)) return null;
  const key = Buffer.from(cursor, "base64url").toString("utf8");
  const separator = key.indexOf("\u0000");
  return separator >= 0 && /^[0-9a-f-]{36}$/.test(key.slice(separator + 1)) ? key : null;
}

/** Mounts the player routes. */
export function playerRoutes(deps: PlayerRoutesDeps): (app: Hono<AppEnv>, registry: RouteRegistry) => void {
  return (app, registry) => {
    addRoute(
      app,
      registry,
      {
        method: "get",
        path: "/api/v1/players",
        summary: "The players online, filtered by group, instance and name prefix; keyset-paged in name order",
        tag,
        permission: "players.view",
        query: ListQuery,
        response: KeysetPageSchema(OnlinePlayerSchema),
      },
      async ({ query }) => {
        let after: string | null = null;
        if (query.cursor) {
          after = decodePlayerCursor(query.cursor);
          if (after === null) throw badRequest("cursor: not a cursor of this list", "BAD_CURSOR");
        }
        const prefix = query.name?.toLowerCase() ?? "";
        const matching = (await deps.players.list()).filter(
          (p) =>
            (!query.group || p.group === query.group) &&
            (!query.instance || p.instanceId === query.instance || p.proxyInstanceId === query.instance) &&
            (!prefix || p.name.toLowerCase().startsWith(prefix)),
        );
        matching.sort((a, b) => (keyOf(a) < keyOf(b) ? -1 : keyOf(a) > keyOf(b) ? 1 : 0));
        const page = keysetPage(matching, keyOf, after, query.pageSize ?? PAGE_SIZE_DEFAULT);
        return { ...page, nextCursor: page.nextCursor === null ? null : encodePlayerCursor(page.nextCursor) };
      },
    );

    addRoute(
      app,
      registry,
      {
        method: "post",
        path: "/api/v1/players/:uuid/transfer",
        summary: "Queues a move of a player to an instance (targetInstanceId) or to the least-loaded RUNNING instance of a group: 202 queued",
        tag,
        permission: "players.transfer",
        params: Type.Object({ uuid: Type.String({ minLength: 1, maxLength: 64 }) }),
        body: TransferBody,
        response: TransferSchema,
        successStatus: 202,
      },
      async ({ params, body, principal, c }) => {
        if ((body.targetInstanceId === undefined) === (body.group === undefined)) {
          throw validationError("Give exactly one of targetInstanceId and group");
        }
        const target =
          body.targetInstanceId !== undefined
            ? await deps.targets.toInstance(params.uuid, body.targetInstanceId)
            : await deps.targets.toGroup(params.uuid, body.group!);
        const transfer = await deps.transfers.request(target.player, target.targetInstanceId, target.targetGroup, principal?.username ?? "unknown");
        await audited(deps.audit, c, {
          action: "player.transfer",
          resourceType: "player",
          resourceId: target.player.uuid,
          details: { name: target.player.name, from: target.player.instanceId, to: target.targetInstanceId, group: target.targetGroup },
        });
        return c.json({ ...transfer }, 202);
      },
    );
  };
}

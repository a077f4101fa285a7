/** Node join token schemas: the create body, the one-time create response and the list record. */
import { Type, type Static } from "@sinclair/typebox";
import { tokenTtlSecondsMax } from "./token-ttl.js";

/** Token statuses, derived from the record's timestamps. */
export const TOKEN_STATUSES = ["ACTIVE", "USED", "REVOKED", "EXPIRED"] as const;
/** One of {@link TOKEN_STATUSES}. */
export type TokenStatus = (typeof TOKEN_STATUSES)[number];

/** Node ids: what a daemon may call itself. */
export const NODE_ID_PATTERN = "^[a-zA-Z0-9][a-zA-Z0-9._-]{0,63}$";

/** POST /api/v1/admin/tokens body. */
export const NodeTokenCreateSchema = Type.Object(
  {
    /** Binds the token to one node id; any node may use it when absent or null. */
    nodeId: Type.Optional(Type.Union([Type.String({ pattern: NODE_ID_PATTERN }), Type.Null()])),
    ttlSeconds: Type.Optional(Type.Integer({ minimum: 1, maximum: tokenTtlSecondsMax })),
    /** Duration text: `30m`, `1h`, `7d`, `1h30m`. */
    ttl: Type.Optional(Type.String({ maxLength: 32 })),
  },
  { additionalProperties: false },
);
/** The create body. */
export type NodeTokenCreate = Static<typeof NodeTokenCreateSchema>;

/** A token as listed: never the value, never the hash. */
export const NodeTokenSchema = Type.Object({
  id: Type.String(),
  nodeId: Type.Union([Type.String(), Type.Null()]),
  status: Type.Union(TOKEN_STATUSES.map((s) => Type.Literal(s))),
  createdAt: Type.String({ format: "date-time" }),
  createdBy: Type.String(),
  expiresAt: Type.String({ format: "date-time" }),
  usedAt: Type.Union([Type.String({ format: "date-time" }), Type.Null()]),
  /** The node that joined with the token. */
  usedByNodeId: Type.Union([Type.String(), Type.Null()]),
  revokedAt: Type.Union([Type.String({ format: "date-time" }), Type.Null()]),
});
/** A token as listed. */
export type NodeToken = Static<typeof NodeTokenSchema>;

/** The create response: the record plus the token value, shown this once. */
export const CreatedNodeTokenSchema = Type.Composite([
  NodeTokenSchema,
  Type.Object({ token: Type.String({ description: "The secret; returned only by this call" }) }),
]);
/** A token with its value, as created. */
export type CreatedNodeToken = Static<typeof CreatedNodeTokenSchema>;

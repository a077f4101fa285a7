/** Request and response schemas shared by the share routes (logs, diagnostics, crashes, shares). */
import { Type } from "@sinclair/typebox";
import { SHARE_EXPIRIES } from "../../share/share-service.js";

/** The share options of a request body; every field optional. */
export const ShareOptionsSchema = Type.Object(
  {
    expiry: Type.Optional(
      Type.Union(
        SHARE_EXPIRIES.map((e) => Type.Literal(e)),
        { description: "1h, 1d (default), 30d or never" },
      ),
    ),
    public: Type.Optional(Type.Boolean({ description: "Readable with the link alone; overrides share.defaultPrivate" })),
    burnAfterRead: Type.Optional(Type.Boolean({ description: "The paste is deleted once read" })),
  },
  { additionalProperties: false },
);

export const ShareResultSchema = Type.Object({
  id: Type.String({ description: "The share's record: GET or DELETE (revoke) /api/v1/shares/{id}" }),
  url: Type.String(),
  kind: Type.String(),
  expiry: Type.String(),
  expiresAt: Type.Union([Type.String({ format: "date-time" }), Type.Null()]),
  public: Type.Boolean(),
  burnAfterRead: Type.Boolean(),
  password: Type.Optional(Type.String({ description: "Needed besides the link to open a private share" })),
  deleteUrl: Type.String(),
  sizeChars: Type.Integer(),
});

/** A recorded share (`GET /api/v1/shares`): never its delete token. */
export const ShareRecordSchema = Type.Object({
  id: Type.String(),
  kind: Type.String({ description: "logs, diagnostics or crash" }),
  pasteId: Type.String(),
  url: Type.String(),
  expiry: Type.String(),
  expiresAt: Type.Union([Type.String({ format: "date-time" }), Type.Null()]),
  public: Type.Boolean(),
  burnAfterRead: Type.Boolean(),
  sizeChars: Type.Integer(),
  createdBy: Type.String(),
  createdAt: Type.String({ format: "date-time" }),
  revokedAt: Type.Union([Type.String({ format: "date-time" }), Type.Null()]),
  revokedBy: Type.Union([Type.String(), Type.Null()]),
  revocable: Type.Boolean({ description: "Not revoked, and the paste service gave a delete token" }),
});

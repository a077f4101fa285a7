/**
 * The error envelope every failing request answers with: `{"error":{"code","message","status"}}`
 * (spec document 1, "Errors"), its typebox schema for the OpenAPI document, and the mapping from
 * thrown values to it.
 */
import { Type, type Static } from "@sinclair/typebox";
import { HTTPException } from "hono/http-exception";
import { ApiError } from "../shared/errors.js";

export const ErrorEnvelopeSchema = Type.Object(
  {
    error: Type.Object({
      code: Type.String({ description: "Stable machine-readable code, e.g. NOT_FOUND" }),
      message: Type.String(),
      status: Type.Integer({ description: "The HTTP status, repeated" }),
    }),
  },
  { $id: "ErrorEnvelope", description: "Error envelope returned by every failing request" },
);

export type ErrorEnvelope = Static<typeof ErrorEnvelopeSchema>;

/** Message of every 500: details go to the log only. */
export const INTERNAL_ERROR_MESSAGE = "An internal error occurred";

/** Builds the envelope body. */
export function errorEnvelope(status: number, code: string, message: string): ErrorEnvelope {
  return { error: { code, message, status } };
}

/** A JSON response carrying the envelope. */
export function errorResponse(status: number, code: string, message: string, headers?: Record<string, string>): Response {
  return new Response(JSON.stringify(errorEnvelope(status, code, message)), {
    status,
    headers: { "content-type": "application/json; charset=UTF-8", ...headers },
  });
}

const CODES_BY_STATUS: Readonly<Record<number, string>> = {
  400: "BAD_REQUEST",
  401: "UNAUTHORIZED",
  403: "FORBIDDEN",
  404: "NOT_FOUND",
  405: "METHOD_NOT_ALLOWED",
  408: "REQUEST_TIMEOUT",
  409: "CONFLICT",
  413: "PAYLOAD_TOO_LARGE",
  415: "UNSUPPORTED_MEDIA_TYPE",
  422: "VALIDATION_ERROR",
  429: "RATE_LIMITED",
};

/** What a thrown value renders as; `internal` marks errors whose details must only be logged. */
export interface ErrorRendering {
  status: number;
  code: string;
  message: string;
  internal: boolean;
}

/**
 * Maps a thrown value to the envelope: an {@link ApiError} keeps its status and code, a hono
 * `HTTPException` below 500 is mapped by status, and anything else is a 500 INTERNAL_ERROR.
 */
export function renderThrown(err: unknown): ErrorRendering {
  if (err instanceof ApiError && err.status >= 400 && err.status <= 599) {
    return { status: err.status, code: err.code, message: err.message, internal: err.status >= 500 && err.code === "INTERNAL_ERROR" };
  }
  if (err instanceof HTTPException && err.status >= 400 && err.status < 500) {
    const code = CODES_BY_STATUS[err.status] ?? "BAD_REQUEST";
    return { status: err.status, code, message: err.message || code.toLowerCase().replace(/_/g, " "), internal: false };
  }
  return { status: 500, code: "INTERNAL_ERROR", message: INTERNAL_ERROR_MESSAGE, internal: true };
}

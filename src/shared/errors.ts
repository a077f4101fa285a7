/**
 * Expected failures carry a stable code and an HTTP status; the HTTP layer renders them as the
 * envelope {"error":{"code","message","status"}}. Broken invariants use {@link assert} instead.
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = "ApiError";
  }
}

export const badRequest = (message: string, code = "BAD_REQUEST") => new ApiError(400, code, message);
export const unauthorized = (message = "Authentication required") => new ApiError(401, "UNAUTHORIZED", message);
export const forbidden = (message = "Permission denied") => new ApiError(403, "FORBIDDEN", message);
export const notFound = (message: string, code = "NOT_FOUND") => new ApiError(404, code, message);
export const conflict = (message: string, code = "CONFLICT") => new ApiError(409, code, message);
export const validationError = (message: string, code = "VALIDATION_ERROR") => new ApiError(422, code, message);

/** Thrown when an invariant is broken: a bug, never an input error. */
export class AssertionError extends Error {
  constructor(message: string) {
    super(`assertion failed: ${message}`);
    this.name = "AssertionError";
  }
}

export function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new AssertionError(message);
}

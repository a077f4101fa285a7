/**
 * Errors a module throws (or receives) that the platform maps to a response or recognises. Each
 * carries a stable `kind`: a module bundle carries its own copy of this SDK, so the platform tells
 * them apart by `kind`, never by `instanceof` (use the `is…` helpers in module code for the same
 * reason). Spec document 3, "Errors": invalid-argument is 422 VALIDATION_ERROR with the message,
 * not-found is 404 NOT_FOUND, anything else 500 INTERNAL_ERROR with the real message logged only.
 */

/** The kinds the platform recognises. */
export type ModuleErrorKind = "invalid-argument" | "not-found" | "storage-quota" | "undeclared-storage" | "capability-unavailable" | "illegal-state";

/** Base of the SDK's errors. */
export class ModuleError extends Error {
  constructor(
    readonly kind: ModuleErrorKind,
    message: string,
  ) {
    super(message);
    this.name = "ModuleError";
  }
}

/** Client input the handler cannot accept: 422 VALIDATION_ERROR with this message. */
export class InvalidArgumentError extends ModuleError {
  constructor(message: string) {
    super("invalid-argument", message);
    this.name = "InvalidArgumentError";
  }
}

/** What the request names does not exist: 404 NOT_FOUND with this message. */
export class NotFoundError extends ModuleError {
  constructor(message: string) {
    super("not-found", message);
    this.name = "NotFoundError";
  }
}

/** A write would take the module past a storage limit of its manifest (`storage.limits`). */
export class StorageQuotaError extends ModuleError {
  constructor(message: string) {
    super("storage-quota", message);
    this.name = "StorageQuotaError";
  }
}

/** The module asked for a storage handle its manifest does not declare (`storage.mongo` / `storage.redis`). */
export class UndeclaredStorageError extends ModuleError {
  constructor(message: string) {
    super("undeclared-storage", message);
    this.name = "UndeclaredStorageError";
  }
}

/** A required capability has no provider now (it went away, or the call's provider failed). */
export class CapabilityUnavailableError extends ModuleError {
  constructor(message: string) {
    super("capability-unavailable", message);
    this.name = "CapabilityUnavailableError";
  }
}

/** An operation out of turn (a response written twice, a route registered with a null handler...). */
export class IllegalStateError extends ModuleError {
  constructor(message: string) {
    super("illegal-state", message);
    this.name = "IllegalStateError";
  }
}

/** The `kind` of an SDK error (from any copy of the SDK), or undefined. */
export function errorKindOf(error: unknown): ModuleErrorKind | undefined {
  const kind = (error as { kind?: unknown } | null)?.kind;
  return typeof kind === "string" ? (kind as ModuleErrorKind) : undefined;
}

export const isInvalidArgument = (error: unknown): boolean => errorKindOf(error) === "invalid-argument";
export const isNotFound = (error: unknown): boolean => errorKindOf(error) === "not-found";
export const isStorageQuotaExceeded = (error: unknown): boolean => errorKindOf(error) === "storage-quota";
export const isUndeclaredStorage = (error: unknown): boolean => errorKindOf(error) === "undeclared-storage";
export const isCapabilityUnavailable = (error: unknown): boolean => errorKindOf(error) === "capability-unavailable";

/** Rebuilds an SDK error of `kind` (errors cross the worker boundary as plain values). */
export function moduleErrorOf(kind: string | undefined, message: string): Error {
  switch (kind) {
    case "invalid-argument":
      return new InvalidArgumentError(message);
    case "not-found":
      return new NotFoundError(message);
    case "storage-quota":
      return new StorageQuotaError(message);
    case "undeclared-storage":
      return new UndeclaredStorageError(message);
    case "capability-unavailable":
      return new CapabilityUnavailableError(message);
    case "illegal-state":
      return new IllegalStateError(message);
    default:
      return new Error(message);
  }
}

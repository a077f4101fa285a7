/** Assertion helpers shared by the domain tests. */
import assert from "node:assert/strict";
import { ApiError } from "../../src/shared/errors.js";

/** A predicate for assert.rejects: an ApiError with this status, code and message. */
export function apiError(status: number, code: string, message: RegExp) {
  return (err: unknown) => {
    assert.ok(err instanceof ApiError, `expected ApiError, got ${String(err)}`);
    assert.equal(err.status, status);
    assert.equal(err.code, code);
    assert.match(err.message, message);
    return true;
  };
}

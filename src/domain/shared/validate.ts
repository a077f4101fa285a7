/** Schema checks inside the services, so a caller other than the REST layer gets the same rules. */
import type { Static, TSchema } from "@sinclair/typebox";
import { Value, type ValueError } from "@sinclair/typebox/value";
import { validationError } from "../../shared/errors.js";

/** Throws 422 VALIDATION_ERROR `<field>: <reason>` for the first violation of `schema`. */
export function checkSchema<T extends TSchema>(schema: T, value: unknown, where: string): asserts value is Static<T> {
  const first = firstSchemaError(schema, value);
  if (!first) return;
  const field = first.path.replace(/^\//, "").replace(/\//g, ".") || where;
  throw validationError(`${field}: ${first.message}`);
}

/**
 * The first violation of `schema`; for a union (`{...} | null`) the deepest error of its branches,
 * so that `loadScaling: {minTps: 0}` is reported at `loadScaling.minTps`, not as "Expected union value".
 */
export function firstSchemaError(schema: TSchema, value: unknown): ValueError | undefined {
  let error = Value.Errors(schema, value).First();
  for (let depth = 0; error && error.errors.length > 0 && depth < 8; depth++) {
    const branches = error.errors.map((branch) => branch.First()).filter((e): e is ValueError => e !== undefined);
    const deepest = branches.reduce<ValueError | undefined>((best, e) => (!best || e.path.length > best.path.length ? e : best), undefined);
    if (!deepest) break;
    error = deepest;
  }
  return error;
}

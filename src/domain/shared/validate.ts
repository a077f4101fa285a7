/** Schema checks inside the services, so a caller other than the REST layer gets the same rules. */
import type { Static, TSchema } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import { validationError } from "../../shared/errors.js";

/** Throws 422 VALIDATION_ERROR `<field>: <reason>` for the first violation of `schema`. */
export function checkSchema<T extends TSchema>(schema: T, value: unknown, where: string): asserts value is Static<T> {
  const first = Value.Errors(schema, value).First();
  if (!first) return;
  const field = first.path.replace(/^\//, "").replace(/\//g, ".") || where;
  throw validationError(`${field}: ${first.message}`);
}

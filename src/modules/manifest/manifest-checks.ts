/**
 * The vocabulary of manifest validation: a {@link ManifestError} names the field path and the rule
 * it breaks (spec document 3, "Errors": "Manifest parse messages name the field path and the violated
 * rule"), and a {@link Fields} reads one object level, refusing keys it does not know.
 */

/** A manifest rule broken at `path`. */
export class ManifestError extends Error {
  readonly code = "INVALID_MANIFEST";
  constructor(
    readonly path: string,
    readonly rule: string,
  ) {
    super(`${path}: ${rule}`);
    this.name = "ManifestError";
  }
}

export const fail = (path: string, rule: string): never => {
  throw new ManifestError(path, rule);
};

const describe = (value: unknown): string => {
  if (value === null) return "null";
  if (Array.isArray(value)) return "a list";
  if (typeof value === "string") return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}…` : value);
  if (typeof value === "object") return "an object";
  return String(value);
};

export const isPlainObject = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);

/** The child path of `path` (the root is ""). */
export const childPath = (path: string, key: string | number): string => (typeof key === "number" ? `${path}[${key}]` : path === "" ? key : `${path}.${key}`);

/** One object level of the manifest: typed reads of its keys; unknown keys are refused up front. */
export class Fields {
  readonly value: Record<string, unknown>;

  constructor(
    readonly path: string,
    raw: unknown,
    allowed: readonly string[],
  ) {
    if (!isPlainObject(raw)) fail(path || "manifest", `must be an object (got ${describe(raw)})`);
    this.value = raw as Record<string, unknown>;
    for (const key of Object.keys(this.value)) {
      if (!allowed.includes(key)) fail(childPath(path, key), `unknown field (allowed: ${allowed.join(", ")})`);
    }
  }

  has(key: string): boolean {
    return this.value[key] !== undefined && this.value[key] !== null;
  }

  at(key: string): string {
    return childPath(this.path, key);
  }

  required(key: string): unknown {
    if (!this.has(key)) fail(this.at(key), "is required");
    return this.value[key];
  }

  string(key: string, rule: { required: true; pattern?: RegExp; patternText?: string }): string;
  string(key: string, rule: { required?: false; pattern?: RegExp; patternText?: string }): string | undefined;
  string(key: string, rule: { required?: boolean; pattern?: RegExp; patternText?: string }): string | undefined {
    if (!this.has(key)) return rule.required ? fail(this.at(key), "is required") : undefined;
    const value = this.value[key];
    if (typeof value !== "string") fail(this.at(key), `must be a string (got ${describe(value)})`);
    const text = value as string;
    if (text.trim() === "") fail(this.at(key), "must not be blank");
    if (rule.pattern && !rule.pattern.test(text)) fail(this.at(key), `${rule.patternText ?? `must match ${rule.pattern.source}`} (got ${describe(text)})`);
    return text;
  }

  boolean(key: string, fallback: boolean): boolean {
    if (!this.has(key)) return fallback;
    const value = this.value[key];
    if (typeof value !== "boolean") fail(this.at(key), `must be true or false (got ${describe(value)})`);
    return value as boolean;
  }

  integer(key: string): number | undefined {
    if (!this.has(key)) return undefined;
    const value = this.value[key];
    if (typeof value !== "number" || !Number.isSafeInteger(value)) fail(this.at(key), `must be an integer (got ${describe(value)})`);
    return value as number;
  }

  list(key: string): unknown[] | undefined {
    if (!this.has(key)) return undefined;
    const value = this.value[key];
    if (!Array.isArray(value)) fail(this.at(key), `must be a list (got ${describe(value)})`);
    return value as unknown[];
  }

  stringList(key: string): string[] | undefined {
    const list = this.list(key);
    if (list === undefined) return undefined;
    return list.map((item, index) => {
      if (typeof item !== "string" || item.trim() === "") fail(childPath(this.at(key), index), `must be a non-blank string (got ${describe(item)})`);
      return item as string;
    });
  }
}

/** The id pattern of modules, capabilities and extensions. */
export const ID_PATTERN = /^[a-z][a-z0-9-]*$/;
/** A module version: three integers with an optional hyphen suffix, no build metadata. */
export const MODULE_VERSION_PATTERN = /^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[a-zA-Z0-9.-]+)?$/;
/** A capability version: three integers with an optional hyphen or plus suffix. */
export const CAPABILITY_VERSION_PATTERN = /^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)([-+][a-zA-Z0-9.+-]+)?$/;

/** Refuses a version-2-only field on manifest version 1. */
export function requireVersion2(fields: Fields, key: string, manifestVersion: number): void {
  if (manifestVersion < 2 && fields.has(key)) fail(fields.at(key), "is a manifestVersion 2 field; it is not accepted with manifestVersion 1");
}

export { describe as describeValue };

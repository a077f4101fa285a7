/**
 * Route templates of module routes (spec document 3, "Module-mounted routes", rules 1 to 3): a
 * template is the part of the path after `/api/v1/modules/{moduleId}/`; a leading slash is optional
 * and normalized away; it is not blank and holds no `?` or `#`; a path parameter is a whole segment
 * written `{name}`; a template matches a path of the same number of segments whose literal segments
 * are equal. There are no wildcards and no regular expressions. Pure: the platform's dispatcher and
 * the module side both use it.
 */
import { IllegalStateError } from "./errors.js";

/** One segment of a parsed template: a literal, or a parameter's name. */
export type TemplateSegment = { readonly literal: string } | { readonly param: string };

/** A checked template. */
export interface RouteTemplate {
  /** The normalized text (no leading slash). */
  readonly text: string;
  readonly segments: readonly TemplateSegment[];
}

const PARAM_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Parses and checks a template; an {@link IllegalStateError} names the broken rule. */
export function parseRouteTemplate(template: unknown): RouteTemplate {
  if (typeof template !== "string") throw new IllegalStateError("route template must be a string");
  const text = template.startsWith("/") ? template.slice(1) : template;
  if (text.trim() === "") throw new IllegalStateError("route template must not be blank");
  if (text.includes("?") || text.includes("#")) throw new IllegalStateError(`route template ${JSON.stringify(template)} must not contain ? or #`);
  const names = new Set<string>();
  const segments = text.split("/").map((segment): TemplateSegment => {
    if (segment.startsWith("{") && segment.endsWith("}")) {
      const name = segment.slice(1, -1);
      if (!PARAM_NAME.test(name))
        throw new IllegalStateError(`route template ${JSON.stringify(template)}: parameter name ${JSON.stringify(name)} is not an identifier`);
      if (names.has(name)) throw new IllegalStateError(`route template ${JSON.stringify(template)}: parameter {${name}} appears twice`);
      names.add(name);
      return { param: name };
    }
    if (segment.includes("{") || segment.includes("}"))
      throw new IllegalStateError(`route template ${JSON.stringify(template)}: a path parameter must be a whole segment written {name}`);
    if (segment.includes("*")) throw new IllegalStateError(`route template ${JSON.stringify(template)}: wildcards are not supported`);
    return { literal: segment };
  });
  return { text, segments };
}

/**
 * Matches the decoded segments of a request path against a template: the parameters' values when it
 * matches, null otherwise.
 */
export function matchRouteTemplate(template: RouteTemplate, pathSegments: readonly string[]): Record<string, string> | null {
  if (pathSegments.length !== template.segments.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < pathSegments.length; i++) {
    const segment = template.segments[i];
    if ("literal" in segment) {
      if (segment.literal !== pathSegments[i]) return null;
    } else {
      params[segment.param] = pathSegments[i];
    }
  }
  return params;
}

/** The decoded segments of the rest of a module path (`a/b%20c` → `["a", "b c"]`); null when an escape is malformed. */
export function pathSegmentsOf(rest: string): string[] | null {
  const trimmed = rest.startsWith("/") ? rest.slice(1) : rest;
  try {
    return trimmed.split("/").map((segment) => decodeURIComponent(segment));
  } catch {
    return null;
  }
}

/**
 * Short ids, as git and docker take them: wherever a command takes the id of an instance, a crash,
 * a node, a backup or a share, any unambiguous beginning of it works. The id as typed is tried
 * first (an exact id always wins, even when it is also the beginning of another); when the
 * controller does not know it, the ids listed for that kind are matched by prefix: one match is
 * used, several fail with exit 1 listing them, none is the controller's 404 (exit 4).
 */
import { CliError } from "./exit-codes.js";
import { ApiRequestError, listOf, segment, type HttpClient } from "./http-client.js";

/** Where the records of one kind are read and listed. */
export interface IdKind {
  /** Singular noun for messages ("instance"). */
  noun: string;
  /** Path of one record, without the id. */
  path: string;
  /** List path and query that lists every record of the kind (the controller's bound). */
  list: { path: string; query?: Record<string, string> };
  /** Field carrying the id in a listed record. */
  idField?: string;
}

export const ID_KINDS = {
  instance: { noun: "instance", path: "/api/v1/services/", list: { path: "/api/v1/services" } },
  crash: { noun: "crash", path: "/api/v1/crashes/", list: { path: "/api/v1/crashes", query: { limit: "10000" } } },
  node: { noun: "node", path: "/api/v1/nodes/", list: { path: "/api/v1/nodes" } },
  backup: { noun: "backup", path: "/api/v1/backups/", list: { path: "/api/v1/backups" } },
  share: { noun: "share", path: "/api/v1/shares/", list: { path: "/api/v1/shares", query: { limit: "500" } } },
} satisfies Record<string, IdKind>;

/** Candidates named in an ambiguity error; the rest are counted. */
export const ambiguousCandidatesShownMax = 10;

/** The ids among `ids` that start with `prefix` (an exact match alone when there is one). */
export function matchPrefix(ids: readonly string[], prefix: string): string[] {
  if (ids.includes(prefix)) return [prefix];
  return ids.filter((id) => id.startsWith(prefix));
}

/** The one id `given` names (itself, or the only id it begins); see the module comment. */
export async function resolveId(client: HttpClient, kind: IdKind, given: string): Promise<string> {
  if (given === "") throw new CliError(`${kind.noun} id must not be empty`);
  try {
    await client.get(`${kind.path}${segment(given)}`);
    return given;
  } catch (error) {
    if (!(error instanceof ApiRequestError) || error.status !== 404) throw error;
    const listed = listOf<Record<string, unknown>>((await client.get(kind.list.path, kind.list.query)).data)
      .map((record) => record[kind.idField ?? "id"])
      .filter((id): id is string => typeof id === "string");
    const matches = matchPrefix(listed, given);
    if (matches.length === 1) return matches[0];
    if (matches.length === 0) throw error;
    const shown = matches.slice(0, ambiguousCandidatesShownMax).join(", ");
    const more = matches.length > ambiguousCandidatesShownMax ? ` and ${matches.length - ambiguousCandidatesShownMax} more` : "";
    throw new CliError(`${kind.noun} id prefix "${given}" is ambiguous: it begins ${matches.length} ids (${shown}${more}); type more of it`);
  }
}

/**
 * Short ids, as git and docker take them: wherever a command takes the id of an instance, a crash,
 * a node, a backup or a share, any unambiguous beginning of it works. The request is sent with the
 * id as typed first (an exact id always wins, and costs nothing extra); only when the controller
 * answers 404 are the ids listed for that kind matched by prefix: one match is asked again, several
 * fail with exit 1 listing them, none (or a list that cannot be read) is the first 404 (exit 4). A
 * request that found nothing changed nothing, so asking again is safe for every method.
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

/**
 * Runs `request` with the id as typed; on a 404 runs it again with the one id `given` begins (see
 * the module comment). Resolves with what `request` resolved and the id it used.
 */
export async function withIdPrefix<T>(
  client: HttpClient,
  kind: IdKind,
  given: string,
  request: (id: string) => Promise<T>,
): Promise<{ id: string; result: T }> {
  if (given === "") throw new CliError(`${kind.noun} id must not be empty`);
  try {
    return { id: given, result: await request(given) };
  } catch (error) {
    if (!(error instanceof ApiRequestError) || error.status !== 404) throw error;
    const id = await matchingId(client, kind, given, error);
    if (id === given) throw error;
    return { id, result: await request(id) };
  }
}

/** The one id `given` names: itself when the controller knows it, else the only id it begins. */
export async function resolveId(client: HttpClient, kind: IdKind, given: string): Promise<string> {
  if (given === "") throw new CliError(`${kind.noun} id must not be empty`);
  try {
    await client.get(`${kind.path}${segment(given)}`);
    return given;
  } catch (error) {
    if (!(error instanceof ApiRequestError) || error.status !== 404) throw error;
    return matchingId(client, kind, given, error);
  }
}

/**
 * The id a confirmation question names: resolved first when the question will be asked (a person
 * confirms the full id), the id as typed when it will not (`--yes`, or a stdin that refuses anyway).
 */
export function idToConfirm(client: HttpClient, kind: IdKind, given: string, willAsk: boolean): Promise<string> {
  return willAsk ? resolveId(client, kind, given) : Promise.resolve(given);
}

async function matchingId(client: HttpClient, kind: IdKind, given: string, notFound: ApiRequestError): Promise<string> {
  let listed: string[];
  try {
    listed = listOf<Record<string, unknown>>((await client.get(kind.list.path, kind.list.query)).data)
      .map((record) => record[kind.idField ?? "id"])
      .filter((id): id is string => typeof id === "string");
  } catch {
    // The ids cannot be listed (no permission, an older controller): the id as typed is all there is.
    throw notFound;
  }
  const matches = matchPrefix(listed, given);
  if (matches.length === 1) return matches[0];
  if (matches.length === 0) throw notFound;
  const shown = matches.slice(0, ambiguousCandidatesShownMax).join(", ");
  const more = matches.length > ambiguousCandidatesShownMax ? ` and ${matches.length - ambiguousCandidatesShownMax} more` : "";
  throw new CliError(`${kind.noun} id prefix "${given}" is ambiguous: it begins ${matches.length} ids (${shown}${more}); type more of it`);
}

/**
 * Queries more than one page watches under the same key, defined once so that every watcher keeps
 * them live the same way (the cache uses the options of the latest watcher).
 *
 * - `groups` (the list, 1,000 groups are about 200 KB): patched from the events that carry the new
 *   values (maintenance, aggregates, deletion), the journal bringing every controller's; fetched
 *   again only when a group is created or changed otherwise, at most every {@link GROUP_LIST_REFETCH_MS}.
 * - `nodes` (a few dozen records with their resources): fetched again on node events and instance
 *   state changes (which move the nodes' reservations), at most every {@link NODE_LIST_REFETCH_MS}.
 * - `overview` (counts the controller computes over every instance record): moved by the events that
 *   say how (an instance entering or leaving the live states, a group created or deleted), and fetched
 *   again to correct what events cannot tell, at most every {@link OVERVIEW_REFETCH_MS}.
 */
import type { ApiClient } from "./api.js";
import { ofTypes } from "./app-context.js";
import type { GroupListItem, Node, Overview } from "./types.js";
import { patchGroupRows, patchOverviewCounts } from "../live/event-reducer.js";
import type { QueryOptions } from "../live/query-cache.js";

export const GROUP_LIST_REFETCH_MS = 1_000;
export const OVERVIEW_REFETCH_MS = 3_000;
export const NODE_LIST_REFETCH_MS = 1_000;

export const GROUPS_KEY = "groups";
export const OVERVIEW_KEY = "overview";
export const NODES_KEY = "nodes";

export function groupsQuery(api: ApiClient): QueryOptions<GroupListItem[]> {
  return {
    load: () => api.get("groups"),
    patch: (rows, batch) => patchGroupRows(rows, batch) as GroupListItem[],
    replay: true,
    watch: ofTypes("GROUP_CREATED", "GROUP_UPDATED", "GROUP_DELETED"),
    minIntervalMs: GROUP_LIST_REFETCH_MS,
  };
}

export function overviewQuery(api: ApiClient): QueryOptions<Overview> {
  return {
    load: () => api.get("overview"),
    patch: patchOverviewCounts,
    watch: ofTypes(
      "INSTANCE_STATE_CHANGED",
      "NODE_CONNECTED",
      "NODE_DISCONNECTED",
      "GROUP_CREATED",
      "GROUP_DELETED",
      "PLAYER_CONNECTED",
      "PLAYER_DISCONNECTED",
    ),
    minIntervalMs: OVERVIEW_REFETCH_MS,
  };
}

export function nodesQuery(api: ApiClient): QueryOptions<Node[]> {
  return { load: () => api.get("nodes"), watch: ofTypes("NODE_*", "INSTANCE_STATE_CHANGED"), minIntervalMs: NODE_LIST_REFETCH_MS };
}

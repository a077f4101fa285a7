/**
 * Keyset paging of a list already in memory and sorted by a string key: a page is the `pageSize`
 * items whose key comes after the cursor, and `nextCursor` is the key of its last item when more
 * follow (null on the last page). Unlike an offset, a cursor stays on its place while items are
 * added or removed in front of it. Used by `GET /api/v1/services` and `GET /api/v1/players`.
 */
import { Type } from "@sinclair/typebox";

/** Items of a page when the request names no `pageSize`. */
export const PAGE_SIZE_DEFAULT = 100;
/** Largest `pageSize` a request may ask for. */
export const PAGE_SIZE_MAX = 500;

/** The `pageSize` query parameter (1 to {@link PAGE_SIZE_MAX}). */
export const PageSizeQuery = Type.Integer({
  minimum: 1,
  maximum: PAGE_SIZE_MAX,
  description: `Items per page, 1 to ${PAGE_SIZE_MAX} (default ${PAGE_SIZE_DEFAULT})`,
});

/** The envelope of a keyset page of `item`. */
export const KeysetPageSchema = <T extends Parameters<typeof Type.Array>[0]>(item: T) =>
  Type.Object({
    data: Type.Array(item),
    pageSize: Type.Integer(),
    nextCursor: Type.Union([Type.String(), Type.Null()], { description: "Cursor of the next page; null on the last page" }),
    total: Type.Integer({ description: "Items matching the filters, over all pages" }),
  });

export interface KeysetPage<T> {
  data: T[];
  pageSize: number;
  nextCursor: string | null;
  total: number;
}

/** The page of `sorted` (ascending by `keyOf`) after `cursor` (from the start when null). */
export function keysetPage<T>(sorted: readonly T[], keyOf: (item: T) => string, cursor: string | null, pageSize: number): KeysetPage<T> {
  let low = 0;
  if (cursor !== null) {
    // The first item whose key is above the cursor.
    let high = sorted.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if (keyOf(sorted[mid]) <= cursor) low = mid + 1;
      else high = mid;
    }
  }
  const data = sorted.slice(low, low + pageSize);
  const more = low + pageSize < sorted.length;
  return { data, pageSize, nextCursor: more && data.length > 0 ? keyOf(data[data.length - 1]) : null, total: sorted.length };
}

/** `list` itself when ascending by `keyOf`, else a sorted copy. */
export function sortedBy<T>(list: readonly T[], keyOf: (item: T) => string): readonly T[] {
  for (let i = 1; i < list.length; i++) {
    if (keyOf(list[i - 1]) > keyOf(list[i])) return [...list].sort((a, b) => (keyOf(a) < keyOf(b) ? -1 : keyOf(a) > keyOf(b) ? 1 : 0));
  }
  return list;
}

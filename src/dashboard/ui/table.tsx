/** A plain data table: columns with renderers, an empty message, optional row limit note. */
import type { ComponentChildren } from "preact";

export interface Column<T> {
  title: string;
  render(row: T): ComponentChildren;
  className?: string;
}

export function DataTable<T>({
  columns,
  rows,
  rowKey,
  empty = "Nothing here.",
  label,
}: {
  columns: Column<T>[];
  rows: readonly T[];
  rowKey(row: T): string;
  empty?: string;
  label: string;
}) {
  if (rows.length === 0) return <p class="muted empty">{empty}</p>;
  return (
    <div class="table-wrap">
      <table aria-label={label}>
        <thead>
          <tr>
            {columns.map((c) => (
              <th key={c.title} class={c.className} scope="col">
                {c.title}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((row) => (
            <tr key={rowKey(row)} data-key={rowKey(row)}>
              {columns.map((c) => (
                <td key={c.title} class={c.className} data-label={c.title}>
                  {c.render(row)}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** Previous / next over keyset pages: a stack of the cursors that led here. */
export function KeysetPager({
  cursors,
  next,
  onPage,
  total,
  shown,
}: {
  cursors: string[];
  next: string | null;
  onPage(cursors: string[]): void;
  total: number;
  shown: number;
}) {
  return (
    <nav class="pager" aria-label="Pages">
      <span class="muted">
        {shown} shown of {total}
      </span>
      <button type="button" class="btn btn-plain" disabled={cursors.length === 0} onClick={() => onPage(cursors.slice(0, -1))}>
        ← Previous
      </button>
      <button type="button" class="btn btn-plain" disabled={next === null} onClick={() => next !== null && onPage([...cursors, next])}>
        Next →
      </button>
    </nav>
  );
}

/**
 * A plain data table (columns with renderers, an empty message) and its windowed form for long
 * lists: only the rows in or near the viewport are in the document (see lib/window-range.ts), so a
 * thousand groups cost the rendering of a few dozen rows, on the first load and on every change.
 */
import type { ComponentChildren } from "preact";
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { windowRange } from "../lib/window-range.js";

export interface Column<T> {
  title: string;
  render(row: T): ComponentChildren;
  className?: string;
}

interface TableProps<T> {
  columns: Column<T>[];
  rows: readonly T[];
  rowKey(row: T): string;
  empty?: string;
  label: string;
}

/** Rows rendered beyond each edge of the viewport. */
const OVERSCAN_ROWS = 8;
/** A row's height until one is measured (one line of text with the table's padding). */
const ROW_HEIGHT_ESTIMATE_PX = 37;

function Head<T>({ columns }: { columns: Column<T>[] }) {
  return (
    <thead>
      <tr>
        {columns.map((c) => (
          <th key={c.title} class={c.className} scope="col">
            {c.title}
          </th>
        ))}
      </tr>
    </thead>
  );
}

function Row<T>({ row, columns, rowKey, index }: { row: T; columns: Column<T>[]; rowKey(row: T): string; index?: number }) {
  return (
    <tr data-key={rowKey(row)} aria-rowindex={index}>
      {columns.map((c) => (
        <td key={c.title} class={c.className} data-label={c.title}>
          {c.render(row)}
        </td>
      ))}
    </tr>
  );
}

export function DataTable<T>({ columns, rows, rowKey, empty = "Nothing here.", label }: TableProps<T>) {
  if (rows.length === 0) return <p class="muted empty">{empty}</p>;
  return (
    <div class="table-wrap">
      <table aria-label={label}>
        <Head columns={columns} />
        <tbody>
          {rows.map((row) => (
            <Row key={rowKey(row)} row={row} columns={columns} rowKey={rowKey} />
          ))}
        </tbody>
      </table>
    </div>
  );
}

/**
 * A table of any length that renders the rows near the viewport only. The page scrolls as usual
 * (the window, or any scrolling ancestor: scroll events are listened to in the capture phase); row
 * heights are measured from the rendered rows (they differ on phones, where rows stack). Screen
 * readers get the row count and each row's index.
 */
export function WindowedTable<T>({ columns, rows, rowKey, empty = "Nothing here.", label }: TableProps<T>) {
  const body = useRef<HTMLTableSectionElement>(null);
  const [view, setView] = useState({ scrolledPx: 0, viewportPx: typeof window === "undefined" ? 800 : window.innerHeight });
  const [rowHeightPx, setRowHeightPx] = useState(ROW_HEIGHT_ESTIMATE_PX);
  const range = windowRange({ count: rows.length, ...view, rowHeightPx, overscan: OVERSCAN_ROWS });

  useEffect(() => {
    let frame = 0;
    const measure = () => {
      frame = 0;
      const top = body.current?.getBoundingClientRect().top;
      if (top === undefined) return;
      const next = { scrolledPx: Math.max(0, -top), viewportPx: window.innerHeight };
      setView((old) => (old.scrolledPx === next.scrolledPx && old.viewportPx === next.viewportPx ? old : next));
    };
    const schedule = () => {
      if (frame === 0) frame = requestAnimationFrame(measure);
    };
    measure();
    window.addEventListener("scroll", schedule, { capture: true, passive: true });
    window.addEventListener("resize", schedule);
    return () => {
      cancelAnimationFrame(frame);
      window.removeEventListener("scroll", schedule, { capture: true });
      window.removeEventListener("resize", schedule);
    };
  }, []);

  useLayoutEffect(() => {
    const rendered = body.current?.querySelectorAll<HTMLElement>("tr[data-key]");
    if (!rendered || rendered.length === 0) return;
    const first = rendered[0].getBoundingClientRect();
    const last = rendered[rendered.length - 1].getBoundingClientRect();
    const measured = (last.bottom - first.top) / rendered.length;
    if (measured > 0 && Math.abs(measured - rowHeightPx) > 0.5) setRowHeightPx(measured);
  });

  if (rows.length === 0) return <p class="muted empty">{empty}</p>;
  return (
    <div class="table-wrap">
      <table aria-label={label} aria-rowcount={rows.length + 1} data-rows={rows.length}>
        <Head columns={columns} />
        <tbody ref={body}>
          {range.topPx > 0 ? <Spacer heightPx={range.topPx} span={columns.length} /> : null}
          {rows.slice(range.start, range.end).map((row, i) => (
            <Row key={rowKey(row)} row={row} columns={columns} rowKey={rowKey} index={range.start + i + 2} />
          ))}
          {range.bottomPx > 0 ? <Spacer heightPx={range.bottomPx} span={columns.length} /> : null}
        </tbody>
      </table>
    </div>
  );
}

function Spacer({ heightPx, span }: { heightPx: number; span: number }) {
  return (
    <tr class="spacer" aria-hidden="true">
      <td colSpan={span} style={{ height: `${heightPx}px` }} />
    </tr>
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
      <span class="muted" data-total={total}>
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

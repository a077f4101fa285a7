/**
 * Which rows of a long list a windowed table renders: those in the scrolled viewport, plus
 * `overscan` rows either side so that a scroll shows rendered rows before the next frame renders
 * more. Rows are taken as `rowHeightPx` tall (the table measures its rows); the rows above and below
 * the window are stood in for by two spacers of their height, so the scrollbar is the full list's.
 */

export interface WindowRange {
  /** First row rendered. */
  start: number;
  /** One past the last row rendered. */
  end: number;
  /** Height of the spacer above the rendered rows. */
  topPx: number;
  /** Height of the spacer below them. */
  bottomPx: number;
}

export interface WindowInput {
  count: number;
  /** How far the table's body is scrolled past the viewport's top (0 when it starts below it). */
  scrolledPx: number;
  viewportPx: number;
  rowHeightPx: number;
  overscan: number;
}

export function windowRange({ count, scrolledPx, viewportPx, rowHeightPx, overscan }: WindowInput): WindowRange {
  if (count === 0) return { start: 0, end: 0, topPx: 0, bottomPx: 0 };
  const height = Math.max(1, rowHeightPx);
  const first = Math.floor(Math.max(0, scrolledPx) / height);
  const visible = Math.ceil(Math.max(0, viewportPx) / height) + 1;
  const start = Math.min(count - 1, Math.max(0, first - overscan));
  const end = Math.min(count, Math.max(start + 1, first + visible + overscan));
  return { start, end, topPx: start * height, bottomPx: (count - end) * height };
}

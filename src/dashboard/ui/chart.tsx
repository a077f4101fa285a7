/**
 * A time-series chart on uPlot, loaded on first use (it is not part of the initial load). Series
 * are `[epoch ms, value]` points; they are aligned on the union of their timestamps. Colours come
 * from the theme's CSS variables, so the chart follows dark and light.
 */
import { useEffect, useRef } from "preact/hooks";
import type uPlotType from "uplot";

export interface ChartSeries {
  label: string;
  points: readonly (readonly [number, number])[];
}

const PALETTE = ["--chart-1", "--chart-2", "--chart-3", "--chart-4", "--chart-5", "--chart-6"];

function align(series: readonly ChartSeries[]): uPlotType.AlignedData {
  const times = [...new Set(series.flatMap((s) => s.points.map((p) => p[0])))].sort((a, b) => a - b);
  const index = new Map(times.map((t, i) => [t, i]));
  const columns = series.map((s) => {
    const column: (number | null)[] = new Array(times.length).fill(null);
    for (const [t, v] of s.points) column[index.get(t)!] = v;
    return column;
  });
  return [times.map((t) => t / 1000), ...columns] as uPlotType.AlignedData;
}

export function Chart({ title, series, unit = "", height = 180 }: { title: string; series: readonly ChartSeries[]; unit?: string; height?: number }) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlotType | null>(null);
  useEffect(() => {
    let cancelled = false;
    let observer: ResizeObserver | null = null;
    void import("uplot").then(({ default: uPlot }) => {
      if (cancelled || !box.current) return;
      plot.current?.destroy();
      const style = getComputedStyle(document.documentElement);
      const color = (name: string) => style.getPropertyValue(name).trim() || "#888";
      const axis = { stroke: color("--text-muted"), grid: { stroke: color("--border") }, ticks: { stroke: color("--border") } };
      plot.current = new uPlot(
        {
          width: box.current.clientWidth || 300,
          height,
          series: [
            {},
            ...series.map((s, i) => ({
              label: s.label,
              stroke: color(PALETTE[i % PALETTE.length]),
              width: 1.5,
              spanGaps: true,
              value: (_u: uPlotType, v: number | null) => (v === null ? "–" : `${Math.round(v * 100) / 100}${unit}`),
            })),
          ],
          axes: [axis, { ...axis, size: 56 }],
          legend: { show: true },
          cursor: { drag: { x: false, y: false } },
        },
        align(series),
        box.current,
      );
      observer = new ResizeObserver(() => box.current && plot.current?.setSize({ width: box.current.clientWidth, height }));
      observer.observe(box.current);
    });
    return () => {
      cancelled = true;
      observer?.disconnect();
      plot.current?.destroy();
      plot.current = null;
    };
  }, [series, height, unit]);
  return (
    <figure class="chart">
      <figcaption>{title}</figcaption>
      <div ref={box} class="chart-box" role="img" aria-label={`${title} chart`} />
      {series.every((s) => s.points.length === 0) ? <p class="muted">No samples in this range yet.</p> : null}
    </figure>
  );
}

/** Arithmetic on chart series (`[epoch ms, value]` points). */

/** The mean per timestamp of several series. */
export function meanSeries(series: readonly (readonly (readonly [number, number])[])[]): [number, number][] {
  const sums = new Map<number, [number, number]>();
  for (const points of series)
    for (const [t, v] of points) {
      const s = sums.get(t) ?? [0, 0];
      sums.set(t, [s[0] + v, s[1] + 1]);
    }
  return [...sums].sort((a, b) => a[0] - b[0]).map(([t, [sum, n]]) => [t, sum / n]);
}

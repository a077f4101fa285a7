/**
 * The simulated server's tick rate under load. `load <percent>` sets how much work a tick does: at
 * 0 a tick takes 2 ms (20 TPS, the cap), at 100 % 52 ms, at 300 % 152 ms (6.6 TPS). TPS over 1, 5
 * and 15 minutes and the average MSPT are exponential moving averages like a Minecraft server's,
 * computed in closed form (the load is constant between changes), so no timer runs per tick.
 */
export const ticksPerSecondMax = 20;
export const idleTickMs = 2;
export const loadPercentMax = 1_000;
const WINDOWS_MS = { tps1m: 60_000, tps5m: 300_000, tps15m: 900_000 } as const;

export const tickMsAt = (loadPercent: number): number => idleTickMs + (loadPercent / 100) * 50;
export const tpsAt = (loadPercent: number): number => Math.min(ticksPerSecondMax, 1000 / tickMsAt(loadPercent));

export interface TickAverages {
  tps1m: number;
  tps5m: number;
  tps15m: number;
  msptAvg: number;
}

export class TickModel {
  private load = 0;
  private at: number;
  private averages: TickAverages;

  constructor(nowMs: number) {
    this.at = nowMs;
    this.averages = { tps1m: ticksPerSecondMax, tps5m: ticksPerSecondMax, tps15m: ticksPerSecondMax, msptAvg: idleTickMs };
  }

  get loadPercent(): number {
    return this.load;
  }

  setLoad(percent: number, nowMs: number): void {
    if (!Number.isFinite(percent) || percent < 0 || percent > loadPercentMax) throw new RangeError(`load must be 0-${loadPercentMax} %`);
    this.advance(nowMs);
    this.load = percent;
  }

  read(nowMs: number): TickAverages {
    this.advance(nowMs);
    return { ...this.averages };
  }

  private advance(nowMs: number): void {
    const elapsed = Math.max(0, nowMs - this.at);
    this.at = Math.max(this.at, nowMs);
    const tps = tpsAt(this.load);
    const toward = (current: number, target: number, windowMs: number) => target + (current - target) * Math.exp(-elapsed / windowMs);
    this.averages = {
      tps1m: toward(this.averages.tps1m, tps, WINDOWS_MS.tps1m),
      tps5m: toward(this.averages.tps5m, tps, WINDOWS_MS.tps5m),
      tps15m: toward(this.averages.tps15m, tps, WINDOWS_MS.tps15m),
      msptAvg: toward(this.averages.msptAvg, tickMsAt(this.load), WINDOWS_MS.tps1m),
    };
  }
}

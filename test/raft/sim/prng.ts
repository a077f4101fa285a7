/**
 * A small seeded pseudo-random generator (mulberry32) for the simulation and randomized tests: every
 * random choice in a run comes from one of these, so a seed replays exactly.
 */
export class Prng {
  private stateWord: number;

  constructor(seed: number) {
    this.stateWord = seed >>> 0;
  }

  /** The next 32-bit unsigned integer. */
  nextUint32(): number {
    this.stateWord = (this.stateWord + 0x6d2b79f5) >>> 0;
    let t = this.stateWord;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }

  /** A float in [0, 1). */
  nextFloat(): number {
    return this.nextUint32() / 4294967296;
  }

  /** An integer in [0, n). */
  int(n: number): number {
    if (!Number.isInteger(n) || n <= 0) throw new RangeError(`int(n) needs a positive integer, got ${n}`);
    return Math.floor(this.nextFloat() * n);
  }

  /** An integer in [lo, hi] (both inclusive). */
  between(lo: number, hi: number): number {
    return lo + this.int(hi - lo + 1);
  }

  chance(probability: number): boolean {
    return this.nextFloat() < probability;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new RangeError("pick from an empty list");
    return items[this.int(items.length)];
  }

  shuffle<T>(items: T[]): T[] {
    for (let i = items.length - 1; i > 0; i--) {
      const j = this.int(i + 1);
      [items[i], items[j]] = [items[j], items[i]];
    }
    return items;
  }

  /** An independent generator derived from this one (for a node, a client, the network). */
  fork(): Prng {
    return new Prng(this.nextUint32() ^ 0x9e3779b9);
  }
}

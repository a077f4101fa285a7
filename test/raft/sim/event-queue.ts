/**
 * The simulation's agenda: events ordered by virtual time, ties broken by insertion order, so a run
 * is a deterministic function of its seed.
 */
export interface SimEvent {
  readonly atMs: number;
  readonly seq: number;
  readonly run: () => void;
}

export class EventQueue {
  private readonly heap: SimEvent[] = [];
  private seqNext = 0;

  get size(): number {
    return this.heap.length;
  }

  schedule(atMs: number, run: () => void): void {
    this.heap.push({ atMs, seq: this.seqNext++, run });
    this.siftUp(this.heap.length - 1);
  }

  /** The earliest event, removed from the queue; undefined when empty. */
  pop(): SimEvent | undefined {
    const heap = this.heap;
    if (heap.length === 0) return undefined;
    const top = heap[0];
    const last = heap.pop() as SimEvent;
    if (heap.length > 0) {
      heap[0] = last;
      this.siftDown(0);
    }
    return top;
  }

  peekTimeMs(): number {
    return this.heap.length === 0 ? Number.POSITIVE_INFINITY : this.heap[0].atMs;
  }

  private before(a: SimEvent, b: SimEvent): boolean {
    return a.atMs < b.atMs || (a.atMs === b.atMs && a.seq < b.seq);
  }

  private siftUp(index: number): void {
    const heap = this.heap;
    let i = index;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.before(heap[i], heap[parent])) break;
      [heap[i], heap[parent]] = [heap[parent], heap[i]];
      i = parent;
    }
  }

  private siftDown(index: number): void {
    const heap = this.heap;
    let i = index;
    for (;;) {
      const left = 2 * i + 1;
      const right = left + 1;
      let smallest = i;
      if (left < heap.length && this.before(heap[left], heap[smallest])) smallest = left;
      if (right < heap.length && this.before(heap[right], heap[smallest])) smallest = right;
      if (smallest === i) return;
      [heap[i], heap[smallest]] = [heap[smallest], heap[i]];
      i = smallest;
    }
  }
}

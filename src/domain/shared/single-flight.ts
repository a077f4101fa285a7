/**
 * Coalesces concurrent identical reads without serving stale data. A caller that arrives while a
 * read for its key is running does not join that read (it began before the caller arrived and could
 * miss a write the caller just made); it waits for the next read, which starts once the running one
 * settles and is shared by every caller that arrived meanwhile. Each result therefore comes from a
 * read that started after its caller asked, and a burst of N identical requests costs at most two
 * reads. Nothing is kept once a read settles.
 */
export class SingleFlight<T> {
  private readonly flights = new Map<string, { running: Promise<T>; next: Promise<T> | null }>();

  /** Runs `fn` for `key`, or shares the next run with every other caller waiting on `key`. */
  run(key: string, fn: () => Promise<T>): Promise<T> {
    const flight = this.flights.get(key);
    if (!flight) return this.start(key, fn);
    flight.next ??= flight.running.then(
      () => this.start(key, fn),
      () => this.start(key, fn),
    );
    return flight.next;
  }

  private start(key: string, fn: () => Promise<T>): Promise<T> {
    const running = Promise.resolve().then(fn);
    const flight = { running, next: null as Promise<T> | null };
    // Replaces the settled flight whose waiters this run serves; later arrivals queue behind it.
    this.flights.set(key, flight);
    const settle = () => {
      if (this.flights.get(key) === flight && flight.next === null) this.flights.delete(key);
    };
    running.then(settle, settle);
    return running;
  }
}

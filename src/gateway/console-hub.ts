/**
 * Console lines of instances whose daemons are connected to this controller: a bounded ring of the
 * latest lines per instance (what a console stream shows first) and the live listeners. Rings of
 * instances not heard from for longest are dropped first once `instancesMax` is reached.
 */

/** One console line as a stream sends it. */
export interface ConsoleEntry {
  /** Increasing per hub, so a client can tell lines apart across reconnects. */
  seq: number;
  instanceId: string;
  line: string;
  stream: string;
  timestampMs: number;
}

export interface ConsoleHubOptions {
  /** Lines kept per instance. */
  linesPerInstance?: number;
  /** Instances with a ring at once. */
  instancesMax?: number;
  /** Listeners per instance. */
  listenersPerInstanceMax?: number;
}

export const consoleLinesPerInstanceDefault = 100;
export const consoleInstancesMaxDefault = 20_000;
export const consoleListenersPerInstanceMaxDefault = 16;

/** Thrown by {@link ConsoleHub.listen} when an instance already has the most listeners allowed. */
export class TooManyListenersError extends Error {
  readonly code = "TOO_MANY_CONNECTIONS";
}

/** Rings and listeners of console output. */
export class ConsoleHub {
  private readonly rings = new Map<string, ConsoleEntry[]>();
  private readonly listeners = new Map<string, Set<(entry: ConsoleEntry) => void>>();
  private readonly linesPerInstance: number;
  private readonly instancesMax: number;
  private readonly listenersMax: number;
  private seq = 0;

  constructor(options: ConsoleHubOptions = {}) {
    this.linesPerInstance = options.linesPerInstance ?? consoleLinesPerInstanceDefault;
    this.instancesMax = options.instancesMax ?? consoleInstancesMaxDefault;
    this.listenersMax = options.listenersPerInstanceMax ?? consoleListenersPerInstanceMaxDefault;
  }

  /** Records a line and hands it to the instance's listeners. */
  line(instanceId: string, line: string, stream: string, timestampMs: number): void {
    const entry: ConsoleEntry = { seq: ++this.seq, instanceId, line, stream, timestampMs };
    let ring = this.rings.get(instanceId);
    if (ring) {
      // Re-insert: the map's order is least recently heard first.
      this.rings.delete(instanceId);
    } else {
      ring = [];
      if (this.rings.size >= this.instancesMax) this.rings.delete(this.rings.keys().next().value as string);
    }
    ring.push(entry);
    if (ring.length > this.linesPerInstance) ring.shift();
    this.rings.set(instanceId, ring);
    for (const listener of this.listeners.get(instanceId) ?? []) listener(entry);
  }

  /** The latest lines of an instance, oldest first. */
  recent(instanceId: string): ConsoleEntry[] {
    return [...(this.rings.get(instanceId) ?? [])];
  }

  /** Listens to new lines of an instance; returns the function that stops listening. */
  listen(instanceId: string, listener: (entry: ConsoleEntry) => void): () => void {
    let set = this.listeners.get(instanceId);
    if (!set) {
      set = new Set();
      this.listeners.set(instanceId, set);
    }
    if (set.size >= this.listenersMax) throw new TooManyListenersError(`Instance ${instanceId} already has ${this.listenersMax} console listeners`);
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.listeners.get(instanceId) === set) this.listeners.delete(instanceId);
    };
  }

  /** Drops an instance's ring (it finished and its record is gone). */
  forget(instanceId: string): void {
    this.rings.delete(instanceId);
  }
}

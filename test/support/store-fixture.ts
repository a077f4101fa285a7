/**
 * What the service tests share: an embedded document store in a fresh temporary directory, a manual
 * clock at a fixed instant, an event bus that records what was published, and the cleanup of all of
 * it. test/domain and test/templates build their fixtures on it.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CloudEvent, EventBus, EventFilterBuilder, EventHandler, Subscription } from "../../src/events/types.js";
import { FakeClock } from "./fake-clock.js";
import { openDocumentStore } from "../../src/store/open.js";
import type { DocumentStore } from "../../src/store/ports.js";

/** The instant every fixture clock starts at. */
export const FIXTURE_START_MS = Date.parse("2026-01-15T12:00:00.000Z");

/** An EventBus that only records what was published, in order. */
export class RecordingEventBus implements EventBus {
  readonly published: { type: string; data: Record<string, unknown> }[] = [];

  publish(type: string, data: Record<string, unknown>): void {
    this.published.push({ type, data });
  }
  publishEvent(event: CloudEvent): void {
    this.published.push({ type: event.type, data: event.data });
  }
  subscribe(_type: string, _handler: EventHandler): Subscription {
    return { unsubscribe: () => undefined };
  }
  subscribeByType(_type: string, _handler: EventHandler): Subscription {
    return { unsubscribe: () => undefined };
  }
  subscribeAll(_handler: EventHandler): Subscription {
    return { unsubscribe: () => undefined };
  }
  on(_type: string): EventFilterBuilder {
    throw new Error("not used by these tests");
  }
  /** The published events of one type. */
  ofType(type: string): Record<string, unknown>[] {
    return this.published.filter((e) => e.type === type).map((e) => e.data);
  }
}

/** A store, clock and event bus on a temporary directory; `close()` removes everything. */
export interface StoreFixture {
  dir: string;
  store: DocumentStore;
  clock: FakeClock;
  events: RecordingEventBus;
  close(): Promise<void>;
}

/** Opens a {@link StoreFixture} in a new temporary directory named with `prefix`. */
export async function openStoreFixture(prefix: string): Promise<StoreFixture> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  const clock = new FakeClock(FIXTURE_START_MS);
  const store = await openDocumentStore({ profile: "development", dataDir: dir, clock, ttlSweepIntervalMs: 0 });
  return {
    dir,
    store,
    clock,
    events: new RecordingEventBus(),
    async close() {
      await store.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Fixtures for the domain service tests: a temporary embedded store and a recording event bus. */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CloudEvent, EventBus, EventFilterBuilder, EventHandler, Subscription } from "../../src/events/types.js";
import { ManualClock } from "../../src/shared/clock.js";
import { openDocumentStore } from "../../src/store/open.js";
import type { DocumentStore } from "../../src/store/ports.js";

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

/** A fresh embedded store in a temporary directory, a manual clock at a fixed instant, and cleanup. */
export async function openFixture(): Promise<{ store: DocumentStore; clock: ManualClock; events: RecordingEventBus; close(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), "cloud-domain-"));
  const clock = new ManualClock(Date.parse("2026-01-15T12:00:00.000Z"));
  const store = await openDocumentStore({ profile: "development", dataDir: dir, clock, ttlSweepIntervalMs: 0 });
  return {
    store,
    clock,
    events: new RecordingEventBus(),
    async close() {
      await store.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Fixtures for the template tests: a service on a temporary embedded store and filesystem blob store. */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CloudEvent, EventBus, EventFilterBuilder, EventHandler, Subscription } from "../../src/events/types.js";
import { ManualClock } from "../../src/shared/clock.js";
import { openFsBlobStore, type FsBlobStore } from "../../src/store/fs-blob-store.js";
import { openDocumentStore } from "../../src/store/open.js";
import type { DocumentStore } from "../../src/store/ports.js";
import type { TemplateLimits } from "../../src/templates/template-records.js";
import { TemplateService } from "../../src/templates/template-service.js";

/** An EventBus that records what was published. */
export class RecordingBus implements EventBus {
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
  ofType(type: string): Record<string, unknown>[] {
    return this.published.filter((e) => e.type === type).map((e) => e.data);
  }
}

/** A template service on fresh stores; `close()` removes everything. */
export interface TemplateFixture {
  dir: string;
  documents: DocumentStore;
  blobs: FsBlobStore;
  events: RecordingBus;
  clock: ManualClock;
  service: TemplateService;
  close(): Promise<void>;
}

/** Opens a {@link TemplateFixture}. */
export async function openTemplateFixture(limits?: Partial<TemplateLimits>): Promise<TemplateFixture> {
  const dir = await mkdtemp(join(tmpdir(), "cloud-templates-"));
  const clock = new ManualClock(Date.parse("2026-01-15T12:00:00.000Z"));
  const documents = await openDocumentStore({ profile: "development", dataDir: dir, clock, ttlSweepIntervalMs: 0 });
  const blobs = await openFsBlobStore(join(dir, "blobs"));
  const events = new RecordingBus();
  const service = new TemplateService({ documents, blobs, events, clock, limits });
  return {
    dir,
    documents,
    blobs,
    events,
    clock,
    service,
    async close() {
      await documents.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

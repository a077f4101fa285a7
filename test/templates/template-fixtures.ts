/** Fixtures for the template tests: a service on the shared store fixture and a filesystem blob store. */
import { join } from "node:path";
import type { FakeClock } from "../support/fake-clock.js";
import { openFsBlobStore, type FsBlobStore } from "../../src/store/fs-blob-store.js";
import type { DocumentStore } from "../../src/store/ports.js";
import type { TemplateLimits } from "../../src/templates/template-records.js";
import { TemplateService } from "../../src/templates/template-service.js";
import { openStoreFixture, type RecordingEventBus } from "../support/store-fixture.js";

/** A template service on fresh stores; `close()` removes everything. */
export interface TemplateFixture {
  dir: string;
  documents: DocumentStore;
  blobs: FsBlobStore;
  events: RecordingEventBus;
  clock: FakeClock;
  service: TemplateService;
  close(): Promise<void>;
}

/** Opens a {@link TemplateFixture}. */
export async function openTemplateFixture(limits?: Partial<TemplateLimits>): Promise<TemplateFixture> {
  const base = await openStoreFixture("cloud-templates-");
  const blobs = await openFsBlobStore(join(base.dir, "blobs"));
  const service = new TemplateService({ documents: base.store, blobs, events: base.events, clock: base.clock, limits });
  return { dir: base.dir, documents: base.store, blobs, events: base.events, clock: base.clock, service, close: base.close };
}

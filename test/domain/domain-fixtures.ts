/** Fixtures for the domain service tests: the shared store fixture of test/support. */
import { openStoreFixture, type StoreFixture } from "../support/store-fixture.js";

export { RecordingEventBus } from "../support/store-fixture.js";

/** A fresh embedded store in a temporary directory, a manual clock at a fixed instant, and cleanup. */
export function openFixture(): Promise<StoreFixture> {
  return openStoreFixture("cloud-domain-");
}

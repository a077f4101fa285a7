// Runs the key-value contract against the in-memory adapter with a manual clock.
import { FakeClock } from "../support/fake-clock.js";
import { MemoryKvStore } from "../../src/store/memory/memory-kv-store.js";
import { runKvStoreContract } from "./kv-store-contract.js";

runKvStoreContract("memory", async () => {
  const clock = new FakeClock(Date.parse("2026-06-01T00:00:00Z"));
  const store = new MemoryKvStore({ clock });
  return {
    store,
    advance: async (ms) => clock.advance(ms),
    dispose: () => store.close(),
  };
});

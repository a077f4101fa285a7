// The share records' lifetimes under a fake clock, on the embedded store and on a real PostgreSQL
// server (the production profile's): a record ends at its paste's expiry (never, for a share that
// does not expire), a revoked one 30 days after the revoke or at its expiry if sooner; reads hide
// an ended record at once and the TTL sweep removes it.
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { openLevelDocumentStore } from "../../src/store/embedded/level-document-store.js";
import { openPostgresDocumentStore } from "../../src/store/postgres/postgres-document-store.js";
import type { DocumentStore } from "../../src/store/ports.js";
import { REVOKED_SHARE_RETENTION_MS, ShareRecords, shareRecordView, SHARES_COLLECTION, type NewShare } from "../../src/share/share-records.js";
import { FakeClock } from "../support/fake-clock.js";
import { startPostgresServer, type PostgresServer } from "../support/postgres-server.js";

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

/** A store opened for one suite: its TTL sweep run by hand, and what to remove afterwards. */
interface OpenedStore {
  store: DocumentStore;
  sweepExpired(): Promise<number>;
  dispose(): Promise<void>;
}

const embedded = async (clock: FakeClock): Promise<OpenedStore> => {
  const directory = await mkdtemp(join(tmpdir(), "share-records-"));
  const store = await openLevelDocumentStore({ directory, clock, ttlSweepIntervalMs: 0 });
  return {
    store,
    sweepExpired: () => store.sweepExpired(),
    dispose: async () => {
      await store.close();
      await rm(directory, { recursive: true, force: true });
    },
  };
};

let postgresServer: PostgresServer | undefined;
const postgres = async (clock: FakeClock): Promise<OpenedStore> => {
  postgresServer = await startPostgresServer();
  const store = await openPostgresDocumentStore({ uri: postgresServer.uri, clock, ttlSweepIntervalMs: 0, poolConnectionsMax: 2 });
  return {
    store,
    sweepExpired: () => store.sweepExpired(),
    dispose: async () => {
      await store.close();
      await postgresServer?.stop();
    },
  };
};

for (const [name, open] of [
  ["embedded", embedded],
  ["PostgreSQL", postgres],
] as const) {
  describe(`share records (${name})`, () => {
    let store: OpenedStore;
    let clock: FakeClock;
    let records: ShareRecords;

    before(async () => {
      clock = new FakeClock(Date.parse("2026-03-01T00:00:00Z"));
      store = await open(clock);
      records = new ShareRecords(store.store, clock);
    });
    after(() => store?.dispose());

    const share = (expiresInMs: number | null, deleteToken = "token-1"): NewShare => ({
      kind: "logs",
      pasteId: "p1",
      url: "http://127.0.0.1:1/?p1#key",
      serviceUrl: "http://127.0.0.1:1/",
      deleteToken,
      expiry: expiresInMs === null ? "never" : "1h",
      expiresAt: expiresInMs === null ? null : new Date(clock.nowMs() + expiresInMs).toISOString(),
      public: false,
      burnAfterRead: false,
      sizeChars: 10,
      createdBy: "admin",
    });

    it("hides a record once its paste expired, and the sweep removes it; one that never expires stays", async () => {
      const hour = await records.create(share(HOUR_MS));
      const never = await records.create(share(null));
      assert.deepEqual(
        (await records.list(10)).map((d) => d._id),
        [never._id, hour._id],
      );
      clock.advance(HOUR_MS);
      assert.equal(await records.get(hour._id), null, "hidden from the moment it expired");
      assert.deepEqual(
        (await records.list(10)).map((d) => d._id),
        [never._id],
      );
      clock.advance(60_000);
      assert.ok((await store.sweepExpired()) >= 1);
      assert.equal(await store.store.collection(SHARES_COLLECTION).get(hour._id), null, "swept");
      clock.advance(365 * DAY_MS);
      assert.equal((await records.get(never._id))?._id, never._id);
    });

    it("keeps a revoked record 30 days, or until its expiry when that comes first", async () => {
      const never = await records.create(share(null));
      const soon = await records.create(share(2 * DAY_MS));
      const revokedNever = await records.markRevoked(never, "alice");
      const revokedSoon = await records.markRevoked(soon, "alice");
      assert.equal(revokedNever.retainUntil, new Date(clock.nowMs() + REVOKED_SHARE_RETENTION_MS).toISOString());
      assert.equal(revokedSoon.retainUntil, soon.expiresAt);
      assert.equal(shareRecordView(revokedNever).revocable, false);
      assert.equal((await records.get(never._id))?.revokedBy, "alice");
      clock.advance(2 * DAY_MS);
      assert.equal(await records.get(soon._id), null);
      assert.equal((await records.get(never._id))?.revokedBy, "alice");
      clock.advance(REVOKED_SHARE_RETENTION_MS);
      assert.equal(await records.get(never._id), null);
    });

    it("lists the newest first up to the limit, past ended records, and never a delete token", async () => {
      clock.advance(DAY_MS);
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        ids.push((await records.create(share(i % 2 === 0 ? null : HOUR_MS, `secret-${i}`)))._id);
        clock.advance(1_000);
      }
      clock.advance(HOUR_MS);
      const listed = await records.list(2);
      assert.deepEqual(
        listed.map((d) => d._id),
        [ids[4], ids[2]],
        "the two expired ones in between are skipped",
      );
      const view = shareRecordView(listed[0]!);
      assert.ok(!JSON.stringify(view).includes("secret-4"));
      assert.equal(view.revocable, true);
      assert.equal(shareRecordView({ ...listed[0]!, deleteToken: "" }).revocable, false);
    });
  });
}

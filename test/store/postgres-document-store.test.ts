// Runs the document store contract against the PostgreSQL adapter on a real server started here.
import { after, before } from "node:test";
import { openPostgresDocumentStore, type PostgresDocumentStore } from "../../src/store/postgres/postgres-document-store.js";
import { startPostgresServer, type PostgresServer } from "../support/postgres-server.js";
import { runDocumentStoreContract } from "./document-store-contract.js";

let server: PostgresServer | undefined;

before(async () => {
  server = await startPostgresServer();
});

after(async () => {
  await server?.stop();
});

// Tests share one database; the contract gives every test its own collection names.
runDocumentStoreContract("PostgreSQL", async () => ({
  open: (clock) => openPostgresDocumentStore({ uri: server!.uri, clock, ttlSweepIntervalMs: 0, poolConnectionsMax: 4 }),
  sweepExpired: (store) => (store as PostgresDocumentStore).sweepExpired(),
  dispose: async () => undefined,
}));

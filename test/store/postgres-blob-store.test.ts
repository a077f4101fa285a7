// Runs the blob store contract against the PostgreSQL adapter on a real server started here.
import { after, before } from "node:test";
import { openPostgresBlobStore } from "../../src/store/postgres/postgres-blob-store.js";
import { startPostgresServer, type PostgresServer } from "../support/postgres-server.js";
import { runBlobStoreContract } from "./blob-store-contract.js";

let server: PostgresServer | undefined;
let tables = 0;

before(async () => {
  server = await startPostgresServer();
});

after(async () => {
  await server?.stop();
});

// Each subject gets its own table, so tests start empty while sharing the server.
runBlobStoreContract("PostgreSQL", async () => {
  const table = `blobs_${++tables}`;
  return {
    open: () => openPostgresBlobStore({ uri: server!.uri, table }),
    dispose: async () => undefined,
  };
});

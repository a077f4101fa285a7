// Runs the document store contract against the MongoDB adapter when CLOUD_TEST_MONGODB_URI names a
// server (none can be installed on the CI machines). Each run uses, then drops, its own database.
import { randomBytes } from "node:crypto";
import { after, describe, it } from "node:test";
import { MongoClient } from "mongodb";
import { openMongoDocumentStore } from "../../src/store/mongo/mongo-document-store.js";
import { runDocumentStoreContract } from "./document-store-contract.js";

const uri = process.env.CLOUD_TEST_MONGODB_URI;

if (!uri) {
  describe("document store contract: MongoDB", () => {
    it("runs against a real server", { skip: "CLOUD_TEST_MONGODB_URI is not set (no MongoDB server on this machine)" }, () => undefined);
  });
} else {
  const dbName = `cloud_contract_${randomBytes(4).toString("hex")}`;

  after(async () => {
    const client = new MongoClient(uri);
    try {
      await client.connect();
      await client.db(dbName).dropDatabase();
    } finally {
      await client.close();
    }
  });

  runDocumentStoreContract("MongoDB", async () => ({
    open: (clock) => openMongoDocumentStore({ uri, dbName, clock }),
    dispose: async () => undefined,
  }));
}

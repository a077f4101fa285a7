// Runs the blob store contract against GridFS when CLOUD_TEST_MONGODB_URI names a server (none can
// be installed on the CI machines). Each run uses, then drops, its own database.
import { randomBytes } from "node:crypto";
import { after, describe, it } from "node:test";
import { MongoClient } from "mongodb";
import { openMongoBlobStore } from "../../src/store/mongo/mongo-blob-store.js";
import { runBlobStoreContract } from "./blob-store-contract.js";

const uri = process.env.CLOUD_TEST_MONGODB_URI;

if (!uri) {
  describe("blob store contract: MongoDB GridFS", () => {
    it("runs against a real server", { skip: "CLOUD_TEST_MONGODB_URI is not set (no MongoDB server on this machine)" }, () => undefined);
  });
} else {
  const dbName = `cloud_blobs_${randomBytes(4).toString("hex")}`;
  let buckets = 0;

  after(async () => {
    const client = new MongoClient(uri);
    try {
      await client.connect();
      await client.db(dbName).dropDatabase();
    } finally {
      await client.close();
    }
  });

  runBlobStoreContract("MongoDB GridFS", async () => {
    const bucketName = `blobs${++buckets}`;
    return {
      open: () => openMongoBlobStore({ uri, dbName, bucketName }),
      dispose: async () => undefined,
    };
  });
}

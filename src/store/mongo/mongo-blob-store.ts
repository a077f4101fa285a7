/**
 * MongoDB {@link BlobStore} on GridFS (bucket `blobs`), so controllers sharing a MongoDB share
 * blobs too. A blob is a GridFS file named by its hash; GridFS writes the file document only
 * after every chunk, so a blob is never visible half-written. Two controllers storing the same
 * bytes at once may create two identical files; reads take either, delete removes all. Writes use
 * `w: "majority", j: true`. Reads verify the hash.
 */
import { GridFSBucket, MongoClient } from "mongodb";
import { assertBlobIntact, isBlobHash, sha256Hex } from "../fs-blob-store.js";
import type { BlobStore } from "../ports.js";
import { mongoDatabaseName } from "./mongo-document-store.js";

/** Options of {@link openMongoBlobStore}. */
export interface MongoBlobStoreOptions {
  uri: string;
  /** Database name; default: the URI's path, else `cloud`. */
  dbName?: string;
  /** GridFS bucket name; default `blobs`. */
  bucketName?: string;
}

/** Connects and returns the store; fails when no server is reachable. */
export async function openMongoBlobStore(options: MongoBlobStoreOptions): Promise<MongoBlobStore> {
  const client = new MongoClient(options.uri, { writeConcern: { w: "majority", journal: true }, serverSelectionTimeoutMS: 10_000 });
  await client.connect();
  const db = client.db(mongoDatabaseName(options.uri, options.dbName));
  return new MongoBlobStore(client, new GridFSBucket(db, { bucketName: options.bucketName ?? "blobs" }));
}

/** The GridFS blob store; create it with {@link openMongoBlobStore}. */
export class MongoBlobStore implements BlobStore {
  constructor(
    private readonly client: MongoClient,
    private readonly bucket: GridFSBucket,
  ) {}

  async has(hash: string): Promise<boolean> {
    if (!isBlobHash(hash)) return false;
    return this.bucket.find({ filename: hash }).limit(1).hasNext();
  }

  async put(data: Uint8Array): Promise<string> {
    const hash = sha256Hex(data);
    if (await this.has(hash)) return hash;
    await new Promise<void>((resolve, reject) => {
      const upload = this.bucket.openUploadStream(hash);
      upload.once("finish", () => resolve());
      upload.once("error", reject);
      upload.end(Buffer.from(data));
    });
    return hash;
  }

  async get(hash: string): Promise<Uint8Array | null> {
    if (!isBlobHash(hash)) return null;
    const file = await this.bucket.find({ filename: hash }).limit(1).next();
    if (!file) return null;
    const chunks: Buffer[] = [];
    for await (const chunk of this.bucket.openDownloadStream(file._id)) chunks.push(chunk as Buffer);
    const data = new Uint8Array(Buffer.concat(chunks));
    assertBlobIntact(hash, data);
    return data;
  }

  async delete(hash: string): Promise<boolean> {
    if (!isBlobHash(hash)) return false;
    const files = await this.bucket.find({ filename: hash }).toArray();
    for (const file of files) await this.bucket.delete(file._id);
    return files.length > 0;
  }

  async list(): Promise<string[]> {
    const names = new Set<string>();
    for await (const file of this.bucket.find({})) if (isBlobHash(file.filename)) names.add(file.filename);
    return [...names].sort();
  }

  async close(): Promise<void> {
    await this.client.close();
  }
}

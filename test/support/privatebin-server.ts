/**
 * A small HTTP server on 127.0.0.1 that speaks the PrivateBin JSON API (format version 2) for the
 * sharing tests: `POST /` with `X-Requested-With: JSONHttpRequest` stores a paste and answers
 * `{"status":0,"id","url","deletetoken"}` (or `{"status":1,"message"}` for a malformed one); the
 * same POST with `{"pasteid","deletetoken"}` deletes one (`{"status":0,"id"}`, or `{"status":1,
 * "message"}` for a wrong token or a paste that is gone), as does `GET
 * /?pasteid=…&deletetoken=…`; `GET /?<id>` with the header reads one (`{"status":0,"id","adata",
 * "ct","meta"}` or `{"status":1,"message"}`). {@link PrivateBinServer.open} decrypts a stored paste
 * with the key of a link's fragment (and a password), written here from the format's description,
 * so the tests read back what a PrivateBin reader would see. `failWith` makes it answer an HTTP
 * error; `withoutDeleteTokens` makes it store pastes without answering a delete token.
 */
import { createDecipheriv, pbkdf2Sync, randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { inflateRawSync } from "node:zlib";

export interface StoredPaste {
  id: string;
  deleteToken: string;
  adata: [[string, string, number, number, number, string, string, string], string, number, number];
  ct: string;
  meta: { expire?: string };
}

export interface PrivateBinServer {
  /** The service URL to configure (`share.serviceUrl`). */
  url: string;
  pastes: Map<string, StoredPaste>;
  /** Requests seen, with their header `x-requested-with`. */
  requests: { method: string; path: string; requestedWith: string | undefined }[];
  /** Answer every request with this HTTP status (null: behave). */
  failWith: number | null;
  /** Answer new pastes without a `deletetoken` (as an instance may). */
  withoutDeleteTokens: boolean;
  /** Reads a paste over the API, as a reader's browser does: its JSON answer. */
  read(pasteId: string): Promise<{ status: number; id?: string; message?: string }>;
  /** Decrypts the paste a link points at; throws when the key (or password) is wrong. */
  open(link: string, password?: string): string;
  close(): Promise<void>;
}

const BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

function base58Decode(text: string): Buffer {
  let value = 0n;
  for (const char of text) {
    const digit = BASE58.indexOf(char);
    if (digit < 0) throw new Error(`not base58: ${char}`);
    value = value * 58n + BigInt(digit);
  }
  const bytes: number[] = [];
  while (value > 0n) {
    bytes.unshift(Number(value % 256n));
    value /= 256n;
  }
  for (const char of text) {
    if (char !== "1") break;
    bytes.unshift(0);
  }
  return Buffer.from(bytes);
}

/** Starts the server on an ephemeral port. */
export async function startPrivateBinServer(): Promise<PrivateBinServer> {
  const pastes = new Map<string, StoredPaste>();
  const requests: PrivateBinServer["requests"] = [];
  const state = { failWith: null as number | null, withoutDeleteTokens: false };
  const deletePaste = (pasteId: unknown, deleteToken: unknown): { status: number; id?: string; message?: string } => {
    const paste = typeof pasteId === "string" ? pastes.get(pasteId) : undefined;
    if (!paste) return { status: 1, message: "Paste does not exist, has expired or has been deleted." };
    if (typeof deleteToken !== "string" || paste.deleteToken !== deleteToken) return { status: 1, message: "Wrong deletion token. Paste was not deleted." };
    pastes.delete(paste.id);
    return { status: 0, id: paste.id };
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      requests.push({ method: req.method ?? "", path: req.url ?? "", requestedWith: req.headers["x-requested-with"] as string | undefined });
      const answer = (status: number, body: unknown) => {
        res.writeHead(status, { "content-type": "application/json" });
        res.end(JSON.stringify(body));
      };
      if (state.failWith !== null) return answer(state.failWith, { status: 1, message: "failing on purpose" });
      const url = new URL(req.url ?? "/", "http://127.0.0.1");
      if (req.method === "GET" && url.searchParams.has("pasteid")) {
        return answer(200, deletePaste(url.searchParams.get("pasteid"), url.searchParams.get("deletetoken")));
      }
      if (req.method === "GET" && url.search.length > 1 && req.headers["x-requested-with"] === "JSONHttpRequest") {
        const paste = pastes.get(url.search.slice(1));
        if (!paste) return answer(200, { status: 1, message: "Paste does not exist, has expired or has been deleted." });
        return answer(200, { status: 0, id: paste.id, adata: paste.adata, ct: paste.ct, meta: paste.meta });
      }
      if (req.method !== "POST" || req.headers["x-requested-with"] !== "JSONHttpRequest") return answer(200, { status: 1, message: "not an API call" });
      let body: { v?: unknown; adata?: unknown; ct?: unknown; meta?: { expire?: string }; pasteid?: unknown; deletetoken?: unknown };
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as typeof body;
      } catch {
        return answer(200, { status: 1, message: "Invalid data." });
      }
      if (body.pasteid !== undefined && body.deletetoken !== undefined) return answer(200, deletePaste(body.pasteid, body.deletetoken));
      if (body.v !== 2 || !Array.isArray(body.adata) || typeof body.ct !== "string") return answer(200, { status: 1, message: "Invalid data." });
      const id = randomBytes(8).toString("hex");
      const deleteToken = randomBytes(16).toString("hex");
      pastes.set(id, { id, deleteToken, adata: body.adata as StoredPaste["adata"], ct: body.ct, meta: body.meta ?? {} });
      answer(200, { status: 0, id, url: `/?${id}`, ...(state.withoutDeleteTokens ? {} : { deletetoken: deleteToken }) });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    pastes,
    requests,
    get failWith() {
      return state.failWith;
    },
    set failWith(status) {
      state.failWith = status;
    },
    get withoutDeleteTokens() {
      return state.withoutDeleteTokens;
    },
    set withoutDeleteTokens(value) {
      state.withoutDeleteTokens = value;
    },
    async read(pasteId) {
      const response = await fetch(`http://127.0.0.1:${port}/?${pasteId}`, { headers: { "x-requested-with": "JSONHttpRequest" } });
      return (await response.json()) as { status: number; id?: string; message?: string };
    },
    open(link, password = "") {
      const parsed = new URL(link);
      const paste = pastes.get(parsed.search.slice(1));
      if (!paste) throw new Error(`no paste for ${link}`);
      const key = base58Decode(parsed.hash.slice(1));
      const [spec] = paste.adata;
      const [iv, salt, iterations, keyBits, tagBits, , , compression] = spec;
      const derived = pbkdf2Sync(Buffer.concat([key, Buffer.from(password, "utf8")]), Buffer.from(salt, "base64"), iterations, keyBits / 8, "sha256");
      const data = Buffer.from(paste.ct, "base64");
      const tagBytes = tagBits / 8;
      const decipher = createDecipheriv("aes-256-gcm", derived, Buffer.from(iv, "base64"), { authTagLength: tagBytes });
      decipher.setAAD(Buffer.from(JSON.stringify(paste.adata), "utf8"));
      decipher.setAuthTag(data.subarray(data.length - tagBytes));
      const plain = Buffer.concat([decipher.update(data.subarray(0, data.length - tagBytes)), decipher.final()]);
      const json = compression === "zlib" ? inflateRawSync(plain) : plain;
      return (JSON.parse(json.toString("utf8")) as { paste: string }).paste;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

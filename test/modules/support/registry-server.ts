/**
 * A static module registry for tests: a real HTTP server on an ephemeral port of 127.0.0.1 serving
 * files from memory (an `index.json` and bundles and signatures), as a web server or a bucket would.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export interface RegistryServer {
  url: string;
  /** Sets the bytes served at `path` (e.g. `/index.json`). */
  put(path: string, body: string | Uint8Array): void;
  /** Paths requested so far. */
  requests: string[];
  close(): Promise<void>;
}

export async function startRegistryServer(): Promise<RegistryServer> {
  const files = new Map<string, Buffer>();
  const requests: string[] = [];
  const server: Server = createServer((req, res) => {
    const path = new URL(req.url ?? "/", "http://x").pathname;
    requests.push(path);
    const body = files.get(path);
    if (!body) {
      res.writeHead(404).end();
      return;
    }
    res
      .writeHead(200, { "content-type": path.endsWith(".json") ? "application/json" : "application/octet-stream", "content-length": body.byteLength })
      .end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    put: (path, body) => files.set(path, Buffer.from(body)),
    requests,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

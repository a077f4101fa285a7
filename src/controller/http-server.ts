/** Serving the HTTP app: binding, the announced URL, and a draining close. */
import type { AddressInfo } from "node:net";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { serve, type ServerType } from "@hono/node-server";

/** How long `stop()` lets open HTTP connections finish before closing them. */
export const HTTP_DRAIN_TIMEOUT_MS = 5_000;

/** Prefix of the startup line that announces the HTTP URL; test helpers parse it. */
export const LISTENING_MESSAGE_PREFIX = "Controller HTTP API listening on ";

export type FetchHandler = Parameters<typeof serve>[0]["fetch"];

/** The repository (or install) root: the nearest ancestor holding package.json. */
export function findRootDir(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let depth = 0; depth < 6; depth++) {
    if (existsSync(join(dir, "package.json"))) return dir;
    dir = dirname(dir);
  }
  return process.cwd();
}

/** The URL clients use for a bound address: wildcard binds are reached on loopback. */
export function urlForAddress(address: AddressInfo): string {
  const host = address.address === "0.0.0.0" ? "127.0.0.1" : address.address === "::" ? "::1" : address.address;
  return `http://${host.includes(":") ? `[${host}]` : host}:${address.port}`;
}

/** Serves `fetch` on host:port and resolves once listening; rejects on a bind error. */
export function listen(fetch: FetchHandler, hostname: string, port: number): Promise<ServerType> {
  return new Promise((resolvePromise, reject) => {
    const server = serve({ fetch, hostname, port });
    const onError = (err: Error) => reject(new Error(`Cannot listen on ${hostname}:${port}: ${err.message}`, { cause: err }));
    server.once("error", onError);
    server.once("listening", () => {
      server.off("error", onError);
      resolvePromise(server);
    });
  });
}

/** Stops accepting connections, lets in-flight requests finish, then closes what is left. */
export function closeServer(server: ServerType, drainTimeoutMs: number): Promise<void> {
  return new Promise((resolvePromise) => {
    const timer = setTimeout(() => {
      if ("closeAllConnections" in server) server.closeAllConnections();
    }, drainTimeoutMs);
    server.close(() => {
      clearTimeout(timer);
      resolvePromise();
    });
    if ("closeIdleConnections" in server) server.closeIdleConnections();
  });
}

/** The client address of a request, read from the node socket (forwarding headers are not trusted). */
import type { Context } from "hono";
import { normalizeIp } from "./cidr.js";

interface NodeBindings {
  incoming?: { socket?: { remoteAddress?: string } };
}

/** Placeholder when no socket is attached (requests dispatched in-process through `app.request`). */
export const UNKNOWN_CLIENT_IP = "unknown";

/** The peer address of the TCP connection, normalized (IPv4-mapped IPv6 becomes IPv4). */
export function socketAddressOf(c: Context): string {
  const env = c.env as NodeBindings | undefined;
  const address = env?.incoming?.socket?.remoteAddress;
  return address ? normalizeIp(address) : UNKNOWN_CLIENT_IP;
}

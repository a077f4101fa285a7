/**
 * Names in the shared key-value store (spec document 2, "Lease key spaces"). Every key starts with
 * `cloud:v1:`, so a future incompatible layout can live beside this one during a rolling upgrade.
 */

/** Prefix of every key and channel this module writes. */
export const KV_KEY_PREFIX = "cloud:v1:";

/** `cloud:v1:lease:<resource>`: value `<controllerId>|<fencing token>` while held. */
export const leaseKey = (resource: string): string => `${KV_KEY_PREFIX}lease:${resource}`;

/** `cloud:v1:lease-token:<resource>`: the monotonic counter the fencing tokens come from. */
export const leaseTokenKey = (resource: string): string => `${KV_KEY_PREFIX}lease-token:${resource}`;

/** The lease resource of a group: `group:<name>`. */
export const groupResource = (groupName: string): string => `group:${groupName}`;

/** `cloud:v1:session:node:<nodeId>`: which controller holds the node's daemon stream. */
export const nodeSessionKey = (nodeId: string): string => `${KV_KEY_PREFIX}session:node:${nodeId}`;

/** Prefix of the controller presence entries (`controller-presence.ts`). */
export const CONTROLLER_PRESENCE_PREFIX = `${KV_KEY_PREFIX}controller:`;

/** `cloud:v1:controller:<controllerId>`: the live process running as this controller id, renewed on a TTL. */
export const controllerPresenceKey = (controllerId: string): string => `${CONTROLLER_PRESENCE_PREFIX}${controllerId}`;

/** `cloud:v1:ticket:<ticket>`: one single-use ticket. */
export const ticketKey = (ticket: string): string => `${KV_KEY_PREFIX}ticket:${ticket}`;

/** The pub/sub channel of the cross-controller event bridge. */
export const EVENT_BRIDGE_CHANNEL = `${KV_KEY_PREFIX}events`;

// The event journal's keys (`cloud:v1:events:sequence`, `cloud:v1:events:journal`) are defined beside it: src/events/event-journal.ts.

/** `cloud:v1:login:account:<sha256 of the username>`: the account's login streak (`src/auth/login-throttle.ts`). */
export const loginAccountKey = (usernameDigest: string): string => `${KV_KEY_PREFIX}login:account:${usernameDigest}`;

/** `cloud:v1:login:address:<client address>`: the client address's login streak. */
export const loginAddressKey = (address: string): string => `${KV_KEY_PREFIX}login:address:${address}`;

/**
 * The controller's HTTP side as the daemon knows it for the current session: the base URL (the
 * host of the gRPC address this session dialled, with the HTTP port the controller announced in
 * hello_ack) and the bearer credential for the template routes (from hello_ack, replaced by every
 * `api_credential` message). Both change with each session, so readers ask at each use.
 */
import type { ApiCredential, HelloAck } from "../wire/daemon-proto.js";

/** Why the controller's HTTP side cannot be reached right now. */
export class ControllerEndpointUnknownError extends Error {
  readonly code = "CONTROLLER_ENDPOINT_UNKNOWN";
  constructor(message: string) {
    super(message);
    this.name = "ControllerEndpointUnknownError";
  }
}

/**
 * The host part of a gRPC target: `host:port`, `[v6]:port`, or either behind a `dns:` /
 * `ipv4:` / `ipv6:` scheme. IPv6 hosts keep their brackets (they go into a URL as they are).
 */
export function grpcAddressHost(address: string): string {
  let target = address.trim();
  const scheme = /^(?:dns|ipv4|ipv6):(?:\/\/[^/]*\/)?/.exec(target);
  if (scheme) target = target.slice(scheme[0].length);
  target = target.split(",")[0]!;
  if (target.startsWith("[")) {
    const close = target.indexOf("]");
    return close > 0 ? target.slice(0, close + 1) : target;
  }
  const colons = target.split(":").length - 1;
  if (colons === 1) return target.slice(0, target.indexOf(":"));
  // A bare IPv6 address without a port, or a host without a port.
  return colons > 1 ? `[${target}]` : target;
}

/** `http://<host of grpcAddress>:<httpPort>`, or null when the controller announced no HTTP port. */
export function controllerHttpBaseUrl(grpcAddress: string, httpPort: number): string | null {
  if (!Number.isInteger(httpPort) || httpPort < 1 || httpPort > 65_535) return null;
  const host = grpcAddressHost(grpcAddress);
  return host === "" ? null : `http://${host}:${httpPort}`;
}

/** The current session's controller HTTP endpoint and API credential. */
export class ControllerEndpoint {
  private baseUrl: string | null = null;
  private credential: ApiCredential | null = null;

  /** A session opened on `address` with this hello_ack: both values are replaced. */
  sessionOpened(address: string, helloAck: HelloAck): void {
    this.baseUrl = controllerHttpBaseUrl(address, helloAck.http_port);
    this.credential = helloAck.api_credential && helloAck.api_credential.token !== "" ? helloAck.api_credential : null;
  }

  /** The controller sent a fresh credential. */
  credentialReceived(credential: ApiCredential): void {
    if (credential.token !== "") this.credential = credential;
  }

  /** `http://host:port` of the current controller, or null. */
  get httpBaseUrl(): string | null {
    return this.baseUrl;
  }

  /** The base URL; throws {@link ControllerEndpointUnknownError} when none is known. */
  requireBaseUrl(): string {
    if (this.baseUrl === null)
      throw new ControllerEndpointUnknownError("The controller's HTTP address is not known (not connected, or the controller announced no HTTP port)");
    return this.baseUrl;
  }

  /** The bearer token; throws {@link ControllerEndpointUnknownError} when the controller gave none. */
  requireToken(): string {
    if (this.credential === null)
      throw new ControllerEndpointUnknownError("No API credential from the controller (not connected, or the controller sent none)");
    return this.credential.token;
  }
}

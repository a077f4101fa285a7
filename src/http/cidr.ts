/**
 * CIDR allow-lists over IPv4 and IPv6. Built on node's `net.BlockList`, which also matches
 * IPv4-mapped IPv6 addresses (`::ffff:10.0.0.1`) against IPv4 ranges.
 */
import { BlockList, isIP } from "node:net";

/** Thrown for a malformed CIDR in the configuration; names the offending entry. */
export class InvalidCidrError extends Error {
  constructor(readonly cidr: string) {
    super(`Invalid CIDR in http.allowedCidrs: ${cidr}`);
    this.name = "InvalidCidrError";
  }
}

/** Strips an IPv6 zone id and brackets, and unwraps IPv4-mapped IPv6 addresses to IPv4. */
export function normalizeIp(address: string): string {
  let ip = address.trim();
  if (ip.startsWith("[") && ip.endsWith("]")) ip = ip.slice(1, -1);
  const zone = ip.indexOf("%");
  if (zone >= 0) ip = ip.slice(0, zone);
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(ip);
  if (mapped && isIP(mapped[1]) === 4) return mapped[1];
  return ip;
}

/** A set of CIDR ranges; `contains` answers for one client address. */
export class CidrSet {
  private readonly list = new BlockList();
  readonly size: number;

  /** @throws InvalidCidrError for an entry that is not `address/prefix` or a bare address. */
  constructor(cidrs: readonly string[]) {
    for (const cidr of cidrs) this.add(cidr);
    this.size = cidrs.length;
  }

  private add(cidr: string): void {
    const [rawAddress, rawPrefix, ...rest] = cidr.trim().split("/");
    const address = normalizeIp(rawAddress ?? "");
    const family = isIP(address);
    if (family === 0 || rest.length > 0) throw new InvalidCidrError(cidr);
    const type = family === 4 ? "ipv4" : "ipv6";
    const maxPrefix = family === 4 ? 32 : 128;
    let prefix = maxPrefix;
    if (rawPrefix !== undefined) {
      if (!/^\d{1,3}$/.test(rawPrefix)) throw new InvalidCidrError(cidr);
      prefix = Number(rawPrefix);
      // `::ffff:10.0.0.0/104` written against the mapped form: convert to the IPv4 prefix.
      if (family === 4 && address !== rawAddress.trim() && prefix >= 96) prefix -= 96;
      if (prefix > maxPrefix) throw new InvalidCidrError(cidr);
    }
    this.list.addSubnet(address, prefix, type);
  }

  /** True when `address` (IPv4, IPv6 or IPv4-mapped IPv6) lies in one of the ranges. */
  contains(address: string): boolean {
    const ip = normalizeIp(address);
    const family = isIP(ip);
    if (family === 0) return false;
    return this.list.check(ip, family === 4 ? "ipv4" : "ipv6");
  }
}

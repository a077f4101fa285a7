/**
 * Ports for servers a test starts later (a child process binds them seconds after they are
 * chosen). They are drawn from 10000–19999, below the kernel's range for outgoing connections
 * (32768–60999 here), so the many client connections of concurrently running tests cannot take
 * a chosen port before its server binds it. Each port is checked bindable on every interface
 * and never handed out twice, by one process or by two test processes on this machine within
 * a few minutes (a claim file per port). Simulated game servers in tests use 21000–29999.
 */
import { mkdirSync, openSync, closeSync, statSync, utimesSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

const portLow = 10_000;
const portHigh = 20_000;
/** Tries before giving up: the range has 10,000 ports. */
const attemptsMax = 200;
const handedOut = new Set<number>();
/**
 * Ports handed out by any test process on this machine: one file per port. Test files run in
 * parallel, and two of them could otherwise choose the same port before either server binds it.
 */
const claimsDir = join(tmpdir(), "cloud-test-port-claims");
/** A claim older than this is taken to be over (its server bound the port long ago, or never will). */
const claimTtlMs = 180_000;

/** Claims `port` for this process unless another process claimed it within the TTL. */
function claim(port: number): boolean {
  const path = join(claimsDir, String(port));
  try {
    mkdirSync(claimsDir, { recursive: true });
    closeSync(openSync(path, "wx"));
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") return true;
  }
  try {
    if (Date.now() - statSync(path).mtimeMs < claimTtlMs) return false;
    const now = new Date();
    utimesSync(path, now, now);
    return true;
  } catch {
    return true;
  }
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "0.0.0.0", () => server.close(() => resolve(true)));
  });
}

/** A port nobody listens on now, for a server the test starts soon. */
export async function unusedPort(): Promise<number> {
  for (let attempt = 0; attempt < attemptsMax; attempt++) {
    const port = portLow + Math.floor(Math.random() * (portHigh - portLow));
    if (handedOut.has(port)) continue;
    if ((await bindable(port)) && claim(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error(`no unused port in ${portLow}-${portHigh - 1} after ${attemptsMax} tries`);
}

/** `count` distinct unused ports. */
export async function unusedPorts(count: number): Promise<number[]> {
  const ports: number[] = [];
  for (let i = 0; i < count; i++) ports.push(await unusedPort());
  return ports;
}

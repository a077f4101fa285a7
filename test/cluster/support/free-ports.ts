/** Free TCP ports for servers a test starts later (see test/support/ports.ts for the range). */
import { unusedPorts } from "../../support/ports.js";

export function freePorts(count: number): Promise<number[]> {
  return unusedPorts(count);
}

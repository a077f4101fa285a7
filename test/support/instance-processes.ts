/**
 * The simulated game servers running on this machine, found through their environment
 * (`CLOUD_INSTANCE_ID` in `/proc/<pid>/environ`): the tests' way of seeing which instance runs as
 * which process, and that no instance id runs twice.
 */
import { readdirSync, readFileSync } from "node:fs";

const INSTANCE_ID_VARIABLE = "CLOUD_INSTANCE_ID=";

/** Every process carrying an instance id, by id (an id with two pids runs twice). */
export function serverProcesses(): Map<string, number[]> {
  const byId = new Map<string, number[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    let environ: string;
    try {
      environ = readFileSync(`/proc/${entry}/environ`, "utf8");
    } catch {
      continue; // ended meanwhile, or not ours to read
    }
    const variable = environ.split("\0").find((v) => v.startsWith(INSTANCE_ID_VARIABLE));
    if (variable) {
      const id = variable.slice(INSTANCE_ID_VARIABLE.length);
      byId.set(id, [...(byId.get(id) ?? []), Number(entry)]);
    }
  }
  return byId;
}

/** The pid of the process of `instanceId`, or null when none runs. */
export function pidOfInstance(instanceId: string): number | null {
  return serverProcesses().get(instanceId)?.[0] ?? null;
}

/** The environment of a process (`/proc/<pid>/environ`): a simulated server's relay address and workload token. */
export function environOf(pid: number): Map<string, string> {
  const env = new Map<string, string>();
  for (const entry of readFileSync(`/proc/${pid}/environ`, "utf8").split("\0")) {
    const eq = entry.indexOf("=");
    if (eq > 0) env.set(entry.slice(0, eq), entry.slice(eq + 1));
  }
  return env;
}

/**
 * Checks on what the controller asks the runner: the shape of an instance spec, where its working
 * directory is, and the per-group fencing tokens every command carries.
 */
import { join } from "node:path";
import { RunnerError, StaleEpochError } from "./runner-errors.js";
import type { InstanceSpec } from "./runner-types.js";

const SAFE_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

/**
 * Throws INVALID_SPEC unless the instance id and group are safe path segments
 * (`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`, no `..`), the port is in 1..65535 and the memory a
 * positive integer. Pure.
 */
export function validateInstanceSpec(spec: InstanceSpec): void {
  const fail = (why: string): never => {
    throw new RunnerError("INVALID_SPEC", `Instance ${spec.instanceId}: ${why}`);
  };
  if (!SAFE_NAME.test(spec.instanceId) || spec.instanceId.includes("..")) fail("instanceId must match ^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$");
  if (!SAFE_NAME.test(spec.group) || spec.group.includes("..")) fail("group must match ^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$");
  if (!Number.isInteger(spec.port) || spec.port < 1 || spec.port > 65_535) fail("port must be in 1..65535");
  if (!Number.isInteger(spec.memoryMb) || spec.memoryMb < 1) fail("memoryMb must be a positive integer");
}

/**
 * The working directory of an instance under `root`: `static/<group>/<instanceId>` for a static
 * instance (kept across runs), `dynamic/<instanceId>` otherwise. Pure; the spec must be valid.
 */
export function workDirectoryOf(root: string, spec: Pick<InstanceSpec, "instanceId" | "group" | "static">): string {
  return spec.static ? join(root, "static", spec.group, spec.instanceId) : join(root, "dynamic", spec.instanceId);
}

/**
 * The highest fencing token seen per group. A token lower than the highest is refused with
 * STALE_EPOCH (a command from a controller that lost the group's lease); a higher one becomes the
 * highest. Tokens are non-negative safe integers (INVALID_COMMAND otherwise).
 */
export class FencingTokens {
  private readonly highest = new Map<string, number>();

  observe(group: string, fencingToken: number): void {
    if (!Number.isSafeInteger(fencingToken) || fencingToken < 0)
      throw new RunnerError("INVALID_COMMAND", `Fencing token must be a non-negative integer (got ${fencingToken})`);
    const highest = this.highest.get(group);
    if (highest !== undefined && fencingToken < highest) throw new StaleEpochError(group, fencingToken, highest);
    if (highest === undefined || fencingToken > highest) this.highest.set(group, fencingToken);
  }

  highestOf(group: string): number | undefined {
    return this.highest.get(group);
  }
}

/**
 * What the unit tests of the scheduler's parts share: the real group, instance, node and crash
 * services on an embedded store in a temp dir (with the fake clock and a recording event bus), a
 * logger that keeps its warnings and errors, and builders of instance records.
 */
import { CrashService } from "../../src/domain/crashes/crash-service.js";
import { GroupService } from "../../src/domain/groups/group-service.js";
import type { InstanceFields } from "../../src/domain/instances/instance-service.js";
import { InstanceService } from "../../src/domain/instances/instance-service.js";
import { NodeService } from "../../src/domain/nodes/node-service.js";
import type { Logger } from "../../src/logs/types.js";
import { openStoreFixture, type StoreFixture } from "../support/store-fixture.js";

/** A logger that keeps what it was told at warn and error. */
export interface RecordingLogger extends Logger {
  readonly warnings: string[];
  readonly errors: string[];
}

export function recordingLogger(): RecordingLogger {
  const warnings: string[] = [];
  const errors: string[] = [];
  return {
    name: "test",
    warnings,
    errors,
    trace: () => undefined,
    debug: () => undefined,
    info: () => undefined,
    warn: (message) => void warnings.push(message),
    error: (message) => void errors.push(message),
  };
}

/** The domain services on one store fixture. */
export interface SchedulerFixture extends StoreFixture {
  instances: InstanceService;
  groups: GroupService;
  nodes: NodeService;
  crashes: CrashService;
}

export async function openSchedulerFixture(prefix: string): Promise<SchedulerFixture> {
  const fx = await openStoreFixture(prefix);
  const instances = new InstanceService(fx.store, fx.clock);
  const groups = new GroupService(fx.store, fx.events, fx.clock, instances);
  const nodes = new NodeService(fx.store, fx.events, fx.clock, instances);
  const crashes = new CrashService(fx.store, fx.clock);
  return Object.assign(fx, { instances, groups, nodes, crashes });
}

/** An instance record with defaults for what a test does not care about. */
export function instanceRecord(fields: Partial<InstanceFields> & Pick<InstanceFields, "id" | "group" | "node" | "state">): InstanceFields {
  return { port: 30000, playerCount: 0, memoryMb: 256, startedAt: null, stoppedAt: null, deploymentRevision: 0, ...fields };
}

/** Lets promise callbacks run (work started by a synchronous call). */
export async function flush(): Promise<void> {
  for (let round = 0; round < 5; round++) await new Promise<void>((resolve) => setImmediate(resolve));
}

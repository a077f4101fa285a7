// Patches and rollbacks racing with another controller's: the admin proposes against a real
// cluster state machine, another proposer's change lands between its read and its commit, and the
// patch merges again on top of it (keeping the other change), announced once; a proposer that
// keeps losing gives up with 409 after the bound.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ClusterConfigAdmin, configChangeAttemptsMax } from "../../src/cluster/state/cluster-config-admin.js";
import { encodeCommand, type AppliedCommand, type ClusterCommand, type UnstampedCommand } from "../../src/cluster/state/cluster-commands.js";
import { ClusterStateMachine } from "../../src/cluster/state/cluster-state-machine.js";
import { createEventBus } from "../../src/events/bus.js";
import type { CloudEvent } from "../../src/events/types.js";
import { ApiError } from "../../src/shared/errors.js";
import { recordingLogger } from "../coordination/support.js";

/** One Raft log applied by one machine; `beforeCommit` runs another proposer's write first. */
function log() {
  const machine = new ClusterStateMachine();
  let index = 0;
  const apply = (command: UnstampedCommand): AppliedCommand<any> => {
    index += 1;
    const result = machine.apply({ index, term: 1, type: "normal", data: encodeCommand({ ...command, atMs: 1_000 + index } as ClusterCommand) });
    return { ...result, index } as AppliedCommand<any>;
  };
  machine.applyMembership(
    { changes: [{ type: "add-voter", nodeId: "ctl-a" }] },
    { voters: ["ctl-a"], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false },
  );
  index += 1;
  apply({
    op: "cluster.stamp",
    clusterId: "c1",
    ca: { certPem: "CERT", keyPem: "KEY" },
    seedSecret: "s".repeat(43),
    member: { nodeId: "ctl-a", label: "a", raftAddr: "10.0.0.1:9190", restAddr: "10.0.0.1:8080", grpcAddr: "10.0.0.1:9090" },
  } as UnstampedCommand);
  const state = { beforeCommit: [] as (() => void)[], commits: 0 };
  const port = {
    activeConfig: () => {
      const version = machine.activeConfigVersion();
      return { version, config: machine.configVersions().find((v) => v.version === version)?.config ?? {} };
    },
    commit: async <T>(command: UnstampedCommand): Promise<AppliedCommand<T>> => {
      state.commits += 1;
      state.beforeCommit.shift()?.();
      return apply(command) as AppliedCommand<T>;
    },
    waitApplied: async () => undefined,
  };
  return { machine, apply, port, state };
}

function bus() {
  const events = createEventBus({ logger: recordingLogger().logger });
  const seen: CloudEvent[] = [];
  events.subscribeAll((event) => void seen.push(event));
  return { events, changes: async () => (await events.flush(), seen.filter((e) => e.type === "CLUSTER_CONFIG_CHANGED").map((e) => e.data)) };
}

describe("cluster config admin: concurrent changes", () => {
  it("a patch that lost the race merges again on top of the other change and is announced once", async () => {
    const l = log();
    const b = bus();
    const admin = new ClusterConfigAdmin(l.port, b.events);
    l.state.beforeCommit.push(() => l.apply({ op: "config.put", config: { "share.enabled": true }, comment: "other", by: "bob", parentVersion: null }));
    const change = await admin.patch({ "crashes.crashLoopThreshold": 7 }, "mine", "alice");
    assert.equal(l.state.commits, 2, "refused once, then merged again");
    assert.deepEqual([change.version, change.parentVersion], [2, 1]);
    assert.deepEqual(l.machine.configVersions().at(-1)!.config, { "share.enabled": true, "crashes.crashLoopThreshold": 7 }, "the other change is kept");
    assert.deepEqual(await b.changes(), [{ version: 2, parentVersion: 1, mutator: "alice", action: "patched" }]);
  });

  it("a rollback that lost the race is checked again against the version now active", async () => {
    const l = log();
    const b = bus();
    const admin = new ClusterConfigAdmin(l.port, b.events);
    await admin.patch({ "share.enabled": true }, "", "alice");
    await admin.patch({ "share.enabled": false }, "", "alice");
    l.state.beforeCommit.push(() => l.apply({ op: "config.activate", version: 1, by: "bob", expectedActive: 2 }));
    await assert.rejects(admin.rollback(1, "alice"), (err: unknown) => err instanceof ApiError && err.code === "CONFIG_VERSION_ACTIVE");
    assert.equal(l.machine.activeConfigVersion(), 1);
    assert.deepEqual(
      (await b.changes()).map((c) => c.action),
      ["patched", "patched"],
      "the lost rollback announced nothing",
    );
  });

  it("gives up with 409 CLUSTER_WRITE_CONFLICT after the bound, changing nothing of its own", async () => {
    const l = log();
    const b = bus();
    const admin = new ClusterConfigAdmin(l.port, b.events);
    for (let i = 0; i < configChangeAttemptsMax; i++) {
      l.state.beforeCommit.push(() => l.apply({ op: "config.put", config: { "scheduler.auditRetentionDays": 10 + i }, comment: "", by: "bob" }));
    }
    await assert.rejects(
      admin.patch({ "share.enabled": true }, "", "alice"),
      (err: unknown) => err instanceof ApiError && err.status === 409 && err.code === "CLUSTER_WRITE_CONFLICT",
    );
    assert.equal(l.state.commits, configChangeAttemptsMax);
    assert.ok(l.machine.configVersions().every((v) => v.createdBy === "bob"));
    assert.deepEqual(await b.changes(), []);
  });
});

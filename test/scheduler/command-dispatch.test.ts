// Command dispatch alone, against a scripted daemon link: every command carries the fencing token
// of the group's scope and none goes out while the scope is not owned; the daemon's answers become
// the actor events of docs/decisions/scheduler-host.md ("Dispatch"); a failure that may pass is
// left to the actor's dispatch timeout, which an instance actor on the fake clock runs here.
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, test } from "node:test";
import { createActor } from "xstate";
import type { InstanceEvent } from "../../actors/instance/transitions.js";
import { actorClock } from "../../src/scheduler/actor-clock.js";
import { provideInstanceEffects, type InstanceEffectsPort } from "../../src/scheduler/actor-effects.js";
import { CAPACITY_REFUSALS, CommandDispatch, PERMANENT_DISPATCH_ERRORS, refused, type CommandDispatchDeps } from "../../src/scheduler/command-dispatch.js";
import { LiveInstances } from "../../src/scheduler/live-instances.js";
import { SupervisedInstances } from "../../src/scheduler/supervised-instances.js";
import type { CommandResult, InstanceCommand } from "../../src/wire/daemon-proto.js";
import { instanceRecord, openSchedulerFixture, recordingLogger, type RecordingLogger, type SchedulerFixture } from "./support.js";

const ok: CommandResult = { command_id: "c", ok: true, error_code: "", message: "" };
const refusal = (code: string, message = ""): CommandResult => ({ command_id: "c", ok: false, error_code: code, message });

describe("command dispatch", () => {
  let fx: SchedulerFixture;
  let live: LiveInstances;
  let supervised: SupervisedInstances;
  let commands: { nodeId: string; command: InstanceCommand }[];
  let answers: (CommandResult | Error)[];
  let sent: string[];
  let tokens: Map<string, number>;
  let logger: RecordingLogger;
  let tracked: Promise<unknown>[];
  let n = 0;
  let group = "";

  before(async () => {
    fx = await openSchedulerFixture("cloud-dispatch-");
  });
  after(() => fx.close());

  beforeEach(async () => {
    group = `lobby${++n}`;
    await fx.groups.create({ name: group, platform: "simulated", scalingMode: "STATIC", minInstances: 1, memoryMb: 256 });
    live = new LiveInstances();
    supervised = new SupervisedInstances();
    commands = [];
    answers = [];
    sent = [];
    tracked = [];
    tokens = new Map([[group, 7]]);
    logger = recordingLogger();
  });

  function dispatcher(overrides: Partial<CommandDispatchDeps> = {}): CommandDispatch {
    return new CommandDispatch({
      daemons: {
        sendCommand: async (nodeId, command) => {
          commands.push({ nodeId, command });
          const answer = answers.shift() ?? ok;
          if (answer instanceof Error) throw answer;
          return answer;
        },
      },
      instances: fx.instances,
      groups: fx.groups,
      credentials: { issueWorkloadToken: (identity, startId) => ({ token: `wl:${identity.instanceId}:${startId}`, expiresAtMs: 0, tokenId: "t" }) },
      live,
      supervised,
      logger,
      fencingTokenOf: (g) => tokens.get(g) ?? null,
      toInstance: (id: string, event: InstanceEvent) =>
        void sent.push(`${id} ${event.type}${event.type === "FAILED" ? ` ${event.reason}` : event.type === "EXITED" ? ` ${event.exitCode}` : ""}`),
      refusedByNode: (ref, code, message) => void sent.push(`${ref.instanceId} refused by ${ref.node}: ${code} ${message}`),
      track: (work) => void tracked.push(work),
      ...overrides,
    });
  }
  async function scheduled(id: string, node = "node-a"): Promise<{ instanceId: string; group: string; node: string }> {
    const record = instanceRecord({ id, group, node, state: "SCHEDULED", startId: `start-of-${id}` });
    await fx.instances.save(record);
    live.put(record);
    supervised.follow(id, "SCHEDULED");
    return { instanceId: id, group, node };
  }

  test("a start carries the scope's fencing token, the spec and a workload token of the record's start; accepted or already there is DISPATCHED", async () => {
    const ref = await scheduled(`${group}-1`);
    const dispatch = dispatcher();
    await dispatch.dispatch(ref);
    answers.push(refusal("INSTANCE_EXISTS"));
    await dispatch.dispatch(ref);
    assert.equal(commands.length, 2);
    const [{ nodeId, command }] = commands;
    assert.equal(nodeId, "node-a");
    assert.equal(command.type, "start_instance");
    const body = command.body as { group: string; fencing_token: number; spec: { instance_id: string; workload_token: string; platform: string } };
    assert.deepEqual(
      [body.group, body.fencing_token, body.spec.instance_id, body.spec.workload_token, body.spec.platform],
      [group, 7, ref.instanceId, `wl:${ref.instanceId}:start-of-${ref.instanceId}`, "simulated"],
    );
    assert.equal(
      (commands[1].command.body as { spec: { workload_token: string } }).spec.workload_token,
      body.spec.workload_token,
      "a second dispatch: the same start",
    );
    assert.deepEqual(sent, [`${ref.instanceId} DISPATCHED`, `${ref.instanceId} DISPATCHED`]);
  });

  test("a refusal that cannot pass fails the instance at once; others are left to the dispatch timeout", async () => {
    const ref = await scheduled(`${group}-1`);
    const dispatch = dispatcher();
    for (const code of PERMANENT_DISPATCH_ERRORS) {
      sent.length = 0;
      answers.push(refusal(code, "no"));
      await dispatch.dispatch(ref);
      assert.deepEqual(sent, [`${ref.instanceId} DISPATCHED`, `${ref.instanceId} FAILED ${code}: no`], code);
    }
    sent.length = 0;
    answers.push(refusal("STALE_EPOCH"), Object.assign(new Error("node-a is not connected"), { code: "NODE_NOT_CONNECTED" }), new Error("socket hang up"));
    for (let i = 0; i < 3; i++) await dispatch.dispatch(ref);
    assert.deepEqual(sent, []);
    assert.deepEqual(
      logger.warnings.map((w) => w.split(": ")[1]?.split(" ")[0]),
      ["STALE_EPOCH", "NODE_NOT_CONNECTED", "COMMAND_FAILED"],
    );
  });

  test("the node's capacity refusal stops the instance (no crash) and reports the refusal for the group's scheduling issue; no retry", async () => {
    const ref = await scheduled(`${group}-1`);
    const dispatch = dispatcher();
    for (const code of CAPACITY_REFUSALS) {
      sent.length = 0;
      answers.push(refusal(code, "taken"));
      await dispatch.dispatch(ref);
      assert.deepEqual(sent, [`${ref.instanceId} STOP`, `${ref.instanceId} refused by node-a: ${code} taken`], code);
      assert.equal(dispatch.startRetriesWaiting(), 0, "not retried");
    }
  });

  test("starts whose dispatch failed and wait for another attempt are counted until dispatched, failed or no longer SCHEDULED", async () => {
    const first = await scheduled(`${group}-1`);
    const second = await scheduled(`${group}-2`);
    const dispatch = dispatcher();
    assert.equal(dispatch.startRetriesWaiting(), 0);
    answers.push(refusal("STALE_EPOCH"), Object.assign(new Error("node-a is not connected"), { code: "NODE_NOT_CONNECTED" }));
    await dispatch.dispatch(first);
    await dispatch.dispatch(second);
    assert.equal(dispatch.startRetriesWaiting(), 2);
    await dispatch.dispatch(first); // accepted on the next attempt
    assert.equal(dispatch.startRetriesWaiting(), 1);
    answers.push(refusal("INVALID_SPEC"));
    await dispatch.dispatch(second); // refused for good
    assert.equal(dispatch.startRetriesWaiting(), 0);
    answers.push(refusal("STALE_EPOCH"));
    await dispatch.dispatch(first);
    assert.equal(dispatch.startRetriesWaiting(), 1);
    supervised.follow(first.instanceId, "STOPPED"); // it left SCHEDULED some other way
    assert.equal(dispatch.startRetriesWaiting(), 0);
  });

  test("a vanished group or record fails the instance; a scope not owned sends nothing", async () => {
    const ref = await scheduled(`${group}-1`);
    await dispatcher().dispatch({ ...ref, group: "deleted-group" });
    await dispatcher().dispatch({ ...ref, instanceId: `${group}-no-record` });
    assert.deepEqual(sent, [
      `${ref.instanceId} DISPATCHED`,
      `${ref.instanceId} FAILED group deleted-group no longer exists`,
      `${group}-no-record DISPATCHED`,
      `${group}-no-record FAILED instance record missing`,
    ]);
    tokens.clear();
    sent.length = 0;
    const dispatch = dispatcher();
    await dispatch.dispatch(ref);
    await dispatch.stop(ref, false);
    await dispatch.forceStopStray("node-a", ref.instanceId, group);
    assert.deepEqual([commands, sent], [[], []]);
  });

  test("stop and force-stop; a daemon that does not know the instance completes the stop", async () => {
    const ref = await scheduled(`${group}-1`);
    const dispatch = dispatcher();
    await dispatch.stop(ref, false);
    await dispatch.stop(ref, true);
    assert.deepEqual(
      commands.map((c) => [c.command.type, (c.command.body as { fencing_token: number }).fencing_token]),
      [
        ["stop_instance", 7],
        ["force_stop_instance", 7],
      ],
    );
    assert.deepEqual(sent, []);
    answers.push(refusal("UNKNOWN_INSTANCE"), refusal("NODE_NOT_CONNECTED"));
    await dispatch.stop(ref, false);
    await dispatch.stop(ref, false);
    assert.deepEqual(sent, [`${ref.instanceId} EXITED 0`]);
    assert.match(logger.warnings.at(-1) ?? "", /^Stop of .* failed: NODE_NOT_CONNECTED/);
    await dispatch.forceStopStray("node-b", "lobby-ghost", group);
    assert.deepEqual(commands.at(-1), {
      nodeId: "node-b",
      command: { type: "force_stop_instance", body: { group, fencing_token: 7, instance_id: "lobby-ghost" } },
    });
  });

  test("a reconnected node gets its SCHEDULED instances at once, and only those", async () => {
    const waiting = await scheduled(`${group}-1`);
    const running = await scheduled(`${group}-2`);
    supervised.follow(running.instanceId, "RUNNING");
    await scheduled(`${group}-3`, "node-b");
    dispatcher().redispatchScheduled("node-a");
    await Promise.all(tracked);
    assert.deepEqual(
      commands.map((c) => `${c.nodeId} ${(c.command.body as { spec: { instance_id: string } }).spec.instance_id}`),
      [`node-a ${waiting.instanceId}`],
    );
  });

  test("dispatch timeout: an instance actor on the fake clock sends the start again until the daemon takes it", async () => {
    const ref = await scheduled(`${group}-1`);
    const clock = fx.clock;
    let actor: ReturnType<typeof createActor<ReturnType<typeof provideInstanceEffects>>> | null = null;
    const dispatch = dispatcher({ toInstance: (_id, event) => actor?.send(event) });
    const port: InstanceEffectsPort = {
      dispatch: (r) => void tracked.push(dispatch.dispatch(r)),
      stop: () => undefined,
      forceStop: () => undefined,
      announceDrain: () => undefined,
      crashed: () => undefined,
      lost: () => undefined,
      timedOut: () => undefined,
      stopUnconfirmed: () => undefined,
    };
    answers.push(refusal("NODE_NOT_CONNECTED"), refusal("COMMAND_TIMEOUT"));
    actor = createActor(provideInstanceEffects(port), {
      clock: actorClock(clock),
      input: { ...ref, timeouts: { dispatchTimeoutMs: 10_000, dispatchAttemptsMax: 3 } },
    });
    actor.start();
    // The dispatch reads the records (real I/O) before it sends: wait for it, not for time.
    const settled = async () => {
      while (tracked.length > 0) await tracked.shift();
    };
    await settled();
    assert.equal(commands.length, 1);
    assert.equal(actor.getSnapshot().value, "SCHEDULED");
    await clock.advanceAsync(9_999);
    await settled();
    assert.equal(commands.length, 1, "not before the timeout");
    await clock.advanceAsync(1);
    await settled();
    assert.equal(commands.length, 2);
    await clock.advanceAsync(10_000);
    await settled();
    assert.equal(commands.length, 3);
    assert.equal(actor.getSnapshot().value, "PREPARING", "the third attempt was taken");
    actor.stop();
    assert.equal(clock.pendingTimers(), 0, "a stopped actor leaves no timer behind");
  });

  test("a refusal as the operator sees it", () => {
    const error = refused(refusal("UNKNOWN_INSTANCE", "not here")) as Error & { code?: string; status?: number };
    assert.equal(error.message, "The daemon refused the command: UNKNOWN_INSTANCE (not here)");
    assert.equal(error.code, "UNKNOWN_INSTANCE");
  });
});

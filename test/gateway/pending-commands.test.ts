// Commands awaiting a daemon's result: ids, the pending bound, deadlines (fired by a fake timer,
// never waited for), refused sends and the failure of everything waiting when the session ends.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { GatewayError } from "../../src/gateway/gateway-errors.js";
import { PendingCommands } from "../../src/gateway/pending-commands.js";
import { FakeClock } from "../support/fake-clock.js";
import type { CommandResult } from "../../src/wire/daemon-proto.js";

/** Deadlines on the fake clock, fired by hand. */
function fakeTimers() {
  const clock = new FakeClock();
  return { clock, fireAll: () => clock.advance(Math.max(0, ...clock.pendingDelaysMs())) };
}

const result = (commandId: string): CommandResult => ({ command_id: commandId, ok: true, error_code: "", message: "" });

async function rejection(promise: Promise<unknown>): Promise<GatewayError> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof GatewayError, `a GatewayError, got ${String(err)}`);
    return err;
  }
  assert.fail("expected a rejection");
}

describe("gateway: pending commands", () => {
  it("gives each command a fresh id, arms its deadline and settles it with the matching result", async () => {
    const t = fakeTimers();
    const pending = new PendingCommands("node-a", 10, t.clock);
    const ids: string[] = [];
    const first = pending.dispatch("stop_instance", 1_500, (id) => ids.push(id) > 0);
    const second = pending.dispatch("stop_instance", 1_500, (id) => ids.push(id) > 0);
    assert.equal(ids.length, 2);
    assert.notEqual(ids[0], ids[1]);
    assert.equal(pending.size, 2);
    assert.deepEqual(t.clock.pendingDelaysMs(), [1_500, 1_500]);

    assert.equal(pending.resolve(result(ids[1]!)), true);
    assert.equal((await second).command_id, ids[1]);
    assert.equal(pending.size, 1);
    assert.equal(t.clock.pendingTimers(), 1, "the answered command's deadline is cleared");
    assert.equal(pending.resolve(result(ids[1]!)), false, "a second result for the same id is ignored");
    assert.equal(pending.resolve(result("unknown")), false);
    pending.resolve(result(ids[0]!));
    assert.equal((await first).command_id, ids[0]);
    assert.equal(t.clock.pendingTimers(), 0);
  });

  it("a command without a result by its deadline fails with COMMAND_TIMEOUT and is forgotten", async () => {
    const t = fakeTimers();
    const pending = new PendingCommands("node-a", 10, t.clock);
    let id = "";
    const waiting = pending.dispatch("start_instance", 250, (commandId) => ((id = commandId), true));
    t.fireAll();
    const error = await rejection(waiting);
    assert.equal(error.code, "COMMAND_TIMEOUT");
    assert.equal(error.message, "Node node-a did not answer command start_instance within 250 ms");
    assert.equal(pending.size, 0);
    assert.equal(pending.resolve(result(id)), false, "a late result finds nothing waiting");
  });

  it("refuses past pendingCommandsMax and when the send is refused, both with QUEUE_FULL", async () => {
    const t = fakeTimers();
    const pending = new PendingCommands("node-a", 2, t.clock);
    void pending.dispatch("stdin", 1_000, () => true);
    void pending.dispatch("stdin", 1_000, () => true);
    let sent = 0;
    const third = await rejection(pending.dispatch("stdin", 1_000, () => ((sent += 1), true)));
    assert.equal(third.code, "QUEUE_FULL");
    assert.match(third.message, /Too many commands awaiting results from node node-a/);
    assert.equal(sent, 0, "nothing is sent past the bound");

    const roomy = new PendingCommands("node-b", 2, t.clock);
    const armedBefore = t.clock.pendingTimers();
    const refused = await rejection(roomy.dispatch("stdin", 1_000, () => false));
    assert.equal(refused.code, "QUEUE_FULL");
    assert.equal(refused.message, "The outbound queue of node node-b is full");
    assert.equal(roomy.size, 0);
    assert.equal(t.clock.pendingTimers(), armedBefore, "the refused command's deadline is cleared");
  });

  it("rejectAll fails every waiting command with NODE_DISCONNECTED and clears their deadlines", async () => {
    const t = fakeTimers();
    const pending = new PendingCommands("node-a", 10, t.clock);
    const a = pending.dispatch("stop_instance", 1_000, () => true);
    const b = pending.dispatch("kill_instance", 1_000, () => true);
    pending.rejectAll("stream cancelled");
    for (const waiting of [a, b]) {
      const error = await rejection(waiting);
      assert.equal(error.code, "NODE_DISCONNECTED");
      assert.equal(error.message, "Node node-a disconnected before answering (stream cancelled)");
    }
    assert.equal(pending.size, 0);
    assert.equal(t.clock.pendingTimers(), 0);
  });
});

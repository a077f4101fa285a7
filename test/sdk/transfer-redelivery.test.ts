// A transfer frame is handed to the handlers once per id — unless every handler failed: then the same
// transfer sent again (a reconnected stream re-sends what is pending) is handed out again, so a move
// cut short by a controller failover is retried rather than left to time out.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { PluginTransfers } from "../../src/sdk/plugin/transfers.js";

const transfer = (id: string) => ({
  id,
  playerUuid: "5627dd98-e6be-3c21-b8a8-e92344183641",
  playerName: "Steve",
  fromInstanceId: "lobby-1",
  targetInstanceId: "game-1",
  targetGroup: null,
  holderInstanceId: "proxy-1",
  requestedBy: "proxy-1",
  requestedAt: "2026-06-01T12:00:00.000Z",
  state: "PENDING",
  failureReason: null,
});
const settle = () => new Promise((resolve) => setImmediate(resolve));

describe("transfer redelivery", () => {
  it("a transfer carried out is not handed out again; one whose handler failed is", async () => {
    const transfers = new PluginTransfers({ info: () => {}, warn: () => {} });
    const calls: string[] = [];
    let failNext = true;
    transfers.onTransfer(async (t) => {
      calls.push(t.id);
      if (failNext) {
        failNext = false;
        throw new Error("the relay answered 502");
      }
    });
    transfers.deliver("transfer", transfer("t-1"));
    await settle();
    transfers.deliver("transfer", transfer("t-1")); // re-sent after a reconnect: the first attempt failed
    await settle();
    transfers.deliver("transfer", transfer("t-1")); // re-sent again: done this time, not repeated
    await settle();
    assert.deepEqual(calls, ["t-1", "t-1"]);
  });

  it("a transfer re-sent while its first attempt still runs is not lost when that attempt then fails", async () => {
    // Under load the reconnected stream re-sends the pending transfer before the move begun on the
    // old stream has failed (its calls wait in the relay for the daemon's next session).
    const transfers = new PluginTransfers({ info: () => {}, warn: () => {} });
    const calls: string[] = [];
    let failFirst: (error: Error) => void = () => undefined;
    transfers.onTransfer((t) => {
      calls.push(t.id);
      if (calls.length === 1) return new Promise<void>((_, reject) => (failFirst = reject));
    });
    transfers.deliver("transfer", transfer("t-4"));
    await settle();
    transfers.deliver("transfer", transfer("t-4")); // the reconnect's re-send, while the move is under way
    await settle();
    assert.deepEqual(calls, ["t-4"], "not run twice at once");
    failFirst(new Error("the relay answered 503"));
    await settle();
    await settle();
    assert.deepEqual(calls, ["t-4", "t-4"], "the re-send that came during the failed attempt is carried out");
    transfers.deliver("transfer", transfer("t-4"));
    await settle();
    assert.deepEqual(calls, ["t-4", "t-4"], "done: not repeated");
  });

  it("a handler that throws synchronously also lets the transfer come again; one failing beside one that worked does not", async () => {
    const transfers = new PluginTransfers({ info: () => {}, warn: () => {} });
    let calls = 0;
    transfers.onTransfer(() => {
      calls += 1;
      if (calls === 1) throw new Error("no port");
    });
    for (let i = 0; i < 3; i++) {
      transfers.deliver("transfer", transfer("t-2"));
      await settle();
    }
    assert.equal(calls, 2);

    const mixed = new PluginTransfers({ info: () => {}, warn: () => {} });
    let worked = 0;
    mixed.onTransfer(() => void (worked += 1));
    mixed.onTransfer(() => {
      throw new Error("a bug in another handler");
    });
    for (let i = 0; i < 2; i++) {
      mixed.deliver("transfer", transfer("t-3"));
      await settle();
    }
    assert.equal(worked, 1, "carried out once");
  });
});

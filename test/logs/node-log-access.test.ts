// A tail on a controller without the node's stream, when the daemon moves here while a poll of the
// old holder is on its way: each record reaches the tail once, and the tail does not start over.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { ClusterNodeLogs, type NodeLogHolders } from "../../src/logs/node-log-access.js";
import { NodeLogBuffers } from "../../src/logs/node-log-buffers.js";
import type { LogRecord } from "../../src/logs/types.js";
import { FakeClock } from "../support/fake-clock.js";

const record = (seq: number, message = `record ${seq}`): LogRecord => ({
  seq,
  ts: 1_700_000_000_000 + seq,
  level: "INFO",
  logger: "cloud.daemon",
  thread: "main",
  message,
});

describe("a node log tail across a move of the daemon", () => {
  it("a poll answered after the daemon moved here delivers only the old holder's records before the move, once", async () => {
    const clock = new FakeClock(0);
    const local = new NodeLogBuffers();
    const remote = new NodeLogBuffers();
    let here = false;
    let answer: (() => void) | null = null;
    const release = (): void => {
      const pending = answer as (() => void) | null;
      assert.ok(pending, "a poll is waiting for the old holder");
      pending();
    };
    const holders: NodeLogHolders = {
      selfId: "b",
      connectedHere: () => here,
      holderOf: async () => (here ? "b" : "a"),
      readRemote: (_controller, nodeId, query) =>
        new Promise((resolve) => {
          answer = () => resolve(remote.read(nodeId, query));
        }),
    };
    const logs = new ClusterNodeLogs({ local, holders, clock, pollIntervalMs: 100 });
    remote.append("n", record(1));
    const source = logs.source("n", {});
    const received: number[] = [];
    const stop = source.follow((r) => received.push(r.seq));
    try {
      const replayDone = source.read({});
      await settle();
      release();
      assert.deepEqual(
        (await replayDone).records.map((r) => r.seq),
        [1],
      );

      // A poll starts and waits for the old holder, which meanwhile got record 2.
      remote.append("n", record(2));
      clock.advance(100);
      await settle();
      // The daemon moves here and sends record 3 before the poll's answer arrives.
      here = true;
      local.append("n", record(3));
      release();
      await settle();
      assert.deepEqual(
        received.sort((x, y) => x - y),
        [2, 3],
        "record 2 from the old holder and 3 from here, each once",
      );

      // Back to the other controller: the tail polls from the newest record, not from the start.
      here = false;
      remote.append("n", record(4));
      answer = null;
      clock.advance(100);
      await settle();
      release();
      await settle();
      assert.deepEqual(
        received.sort((x, y) => x - y),
        [2, 3, 4],
      );
    } finally {
      stop();
    }
  });
});

async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await new Promise((resolve) => setImmediate(resolve));
}

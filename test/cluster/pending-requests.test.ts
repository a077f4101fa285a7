import { strict as assert } from "node:assert";
import { test } from "node:test";
import { HostErrorCode, RaftHostError } from "../../src/cluster/raft-host/host-errors.js";
import { PendingProposals, PendingReads } from "../../src/cluster/raft-host/pending-requests.js";
import { RequestFraming, stripRequestHeader } from "../../src/cluster/raft-host/request-framing.js";

test("request framing: a host recognises its own ids only, and the payload comes back unchanged", () => {
  const mine = new RequestFraming();
  const other = new RequestFraming();
  const payload = new Uint8Array([1, 2, 3]);
  const first = mine.frame(payload);
  const second = mine.frame(payload);
  assert.notEqual(first.counter, second.counter);
  assert.equal(mine.ownCounter(first.data), first.counter);
  assert.equal(other.ownCounter(first.data), null);
  assert.deepEqual([...stripRequestHeader(first.data)], [1, 2, 3]);
  assert.equal(mine.ownCounter(payload), null, "unframed bytes carry no id");
  assert.deepEqual([...stripRequestHeader(payload)], [1, 2, 3]);
});

test("pending proposals: settle by counter, fail the overwritten, expire at the deadline", () => {
  const proposals = new PendingProposals();
  const outcomes: string[] = [];
  const track = (name: string) =>
    [(value: unknown) => outcomes.push(`${name}=${String(value)}`), (error: RaftHostError) => outcomes.push(`${name}!${error.code}`)] as const;
  proposals.add(1, ...track("a"), 100);
  proposals.add(2, ...track("b"), 100);
  proposals.add(3, ...track("c"), 50);
  proposals.noteIndex(2, 7);
  proposals.settle(1, "ok");
  proposals.settle(99, "nobody");
  proposals.failOverwritten(6);
  assert.deepEqual(outcomes, ["a=ok"], "index 7 is not applied yet");
  proposals.failOverwritten(7);
  proposals.expire(50, null);
  assert.deepEqual(outcomes, ["a=ok", `b!${HostErrorCode.ProposalDropped}`, `c!${HostErrorCode.Timeout}`]);
  assert.equal(proposals.size, 0);
});

test("pending reads: reads share one round in flight, resolve once applied, and expire", () => {
  const framing = new RequestFraming();
  let nowMs = 0;
  let applied = 0;
  const contexts: Uint8Array[] = [];
  const reads = new PendingReads({
    framing,
    readTimeoutMs: 100,
    nowMs: () => nowMs,
    appliedIndex: () => applied,
    requestReadIndex: (context) => contexts.push(context),
    toHostError: () => new RaftHostError(HostErrorCode.NotLeader, "not leader"),
    kick: () => undefined,
  });
  const outcomes: string[] = [];
  const read = (name: string) =>
    reads.add(
      () => outcomes.push(name),
      (error) => outcomes.push(`${name}!${error.code}`),
    );
  read("r1");
  read("r2");
  read("r3");
  assert.equal(contexts.length, 1, "r2 and r3 wait for the next round");
  reads.onReadState(contexts[0], 5);
  assert.equal(contexts.length, 2, "the next round leaves once the first is answered");
  assert.deepEqual(outcomes, [], "index 5 is not applied yet");
  applied = 5;
  reads.serve();
  assert.deepEqual(outcomes, ["r1"]);
  reads.onReadState(new RequestFraming().frame(new Uint8Array(0)).data, 5);
  assert.deepEqual(outcomes, ["r1"], "another host's answer settles nothing");
  nowMs = 100;
  reads.expire(nowMs, null);
  assert.deepEqual(outcomes, ["r1", `r2!${HostErrorCode.Timeout}`, `r3!${HostErrorCode.Timeout}`]);
  assert.equal(reads.size, 0);
});

test("pending reads: a refused round fails its reads with the host's error", () => {
  const reads = new PendingReads({
    framing: new RequestFraming(),
    readTimeoutMs: 100,
    nowMs: () => 0,
    appliedIndex: () => 0,
    requestReadIndex: () => {
      throw new Error("not leader");
    },
    toHostError: () => new RaftHostError(HostErrorCode.NotLeader, "not leader"),
    kick: () => undefined,
  });
  const outcomes: string[] = [];
  reads.add(
    () => outcomes.push("ok"),
    (error) => outcomes.push(error.code),
  );
  assert.deepEqual(outcomes, [HostErrorCode.NotLeader]);
  assert.equal(reads.size, 0);
});

// The placement ledger of one machine, pure: what a claim is checked against, and the text a claim
// or a release writes (appended or cut out, re-encoded whole only when it must be).
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { decodeLedger, encodeReservation, HostLedger, type Reservation } from "../../src/scheduler/placement-ledger.js";

const r = (instanceId: string, port: number, memoryMb = 100, node = "node-a"): Reservation => ({
  instanceId,
  group: "g",
  node,
  port,
  memoryMb,
  claimedAtMs: 7,
});
const textOf = (...list: Reservation[]) => list.map(encodeReservation).join("\n");

describe("placement ledger", () => {
  test("claims are checked in order against the ledger and each other: a port once per host, memory per node within its budget", () => {
    const ledger = HostLedger.decode(textOf(r("a", 30000, 600), r("b", 30001, 100, "node-b")));
    const plan = ledger.planClaims([r("c", 30000), r("d", 30002, 300), r("e", 30002), r("f", 30003, 200), r("g", 30004, 100, "node-b")], (node) =>
      node === "node-a" ? 1_000 : 200,
    );
    assert.deepEqual(
      [...plan.refusals].map(([id, why]) => `${id} ${why.code}: ${why.message}`),
      [
        "c PORT_TAKEN: port 30000 is reserved by a",
        "e PORT_TAKEN: port 30002 is reserved by d",
        "f MEMORY_FULL: needs 200 MB, 900 of 1000 MB reserved on node-a",
      ],
    );
    assert.deepEqual(
      plan.accepted.map((x) => x.instanceId),
      ["d", "g"],
    );
    assert.equal(plan.text, textOf(r("a", 30000, 600), r("b", 30001, 100, "node-b"), r("d", 30002, 300), r("g", 30004, 100, "node-b")), "appended");
    assert.equal(ledger.reservedMb("node-a"), 600, "a plan changes nothing");
    ledger.apply(plan.accepted, plan.text!);
    assert.equal(ledger.reservedMb("node-a"), 900);
    assert.equal(ledger.planClaims([r("h", 30005, 101)], () => 1_000).refusals.get("h")?.code, "MEMORY_FULL");
  });

  test("a claim for an instance already entered replaces its entry (a STATIC slot started again): the ledger is written whole", () => {
    const ledger = HostLedger.decode(textOf(r("slot-1", 30000, 500), r("x", 30001)));
    const plan = ledger.planClaims([r("slot-1", 30002, 500)], () => 1_000);
    assert.equal(plan.refusals.size, 0, "its own old memory does not count against it");
    assert.equal(plan.text, textOf(r("x", 30001), r("slot-1", 30002, 500)));
  });

  test("a release cuts its line out wherever it is; the last one leaves an empty ledger", () => {
    const [a, b, c] = [r("a", 1), r("b", 2), r("c", 3)];
    for (const [gone, left] of [
      ["a", [b, c]],
      ["b", [a, c]],
      ["c", [a, b]],
    ] as const) {
      assert.equal(HostLedger.decode(textOf(a, b, c)).planRemoval([gone]), textOf(...left), `without ${gone}`);
    }
    assert.equal(HostLedger.decode(textOf(a)).planRemoval(["a"]), "");
    assert.equal(HostLedger.decode(textOf(a)).planRemoval(["zz"]), null, "nothing to remove");
  });

  test("lines of another format, and a second line of one instance, are dropped by the next write", () => {
    const text = `garbage\n${textOf(r("a", 1))}\n${textOf(r("a", 9))}`;
    assert.deepEqual([...decodeLedger(text).keys()], ["a"]);
    const ledger = HostLedger.decode(text);
    const plan = ledger.planClaims([r("b", 2)], () => 1_000);
    assert.equal(plan.text, textOf(r("a", 1), r("b", 2)));
  });
});

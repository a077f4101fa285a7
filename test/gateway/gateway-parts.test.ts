// The gateway's small parts: per-node record writes in order, report fan-out that survives a
// failing handler, the node id of a client certificate, join refusal statuses and tuning defaults.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { nodeIdOfPeerCertificate } from "../../src/gateway/connect-handshake.js";
import { heartbeatIntervalMsDefault, resolveGatewayTuning, type DaemonReport } from "../../src/gateway/gateway-types.js";
import { joinRefusalStatus } from "../../src/gateway/join-handler.js";
import { NodeWriteQueue } from "../../src/gateway/node-write-queue.js";
import { ReportIntake } from "../../src/gateway/report-intake.js";
import type { Logger } from "../../src/logs/types.js";

function recordingLogger(): Logger & { errors: string[] } {
  const errors: string[] = [];
  const ignore = () => undefined;
  return { name: "test", trace: ignore, debug: ignore, info: ignore, warn: ignore, error: (message) => void errors.push(message), errors };
}

/** A promise the test resolves or rejects. */
function gate() {
  let open!: () => void;
  let fail!: (err: Error) => void;
  const promise = new Promise<void>((resolve, reject) => ((open = resolve), (fail = reject)));
  return { promise, open, fail };
}

describe("gateway: node write queue", () => {
  it("runs one node's writes one after the other, in order, and other nodes' beside them", async () => {
    const queue = new NodeWriteQueue(recordingLogger());
    const log: string[] = [];
    const first = gate();
    queue.enqueue("a", "the connection", async () => {
      log.push("a1 start");
      await first.promise;
      log.push("a1 end");
    });
    queue.enqueue("a", "the status", async () => void log.push("a2"));
    queue.enqueue("b", "the status", async () => void log.push("b1"));
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(log, ["a1 start", "b1"], "a2 waits for a1; b does not wait for a");
    assert.equal(queue.busyNodes, 1);
    first.open();
    await queue.settled();
    assert.deepEqual(log, ["a1 start", "b1", "a1 end", "a2"]);
    assert.equal(queue.busyNodes, 0, "an empty chain is forgotten");
  });

  it("a failed write is logged with its name and does not stop the writes behind it", async () => {
    const logger = recordingLogger();
    const queue = new NodeWriteQueue(logger);
    const failing = gate();
    let after = false;
    queue.enqueue("n1", "the disconnection", () => failing.promise);
    queue.enqueue("n1", "the status", async () => void (after = true));
    failing.fail(new Error("store closed"));
    await queue.settled();
    assert.equal(after, true);
    assert.deepEqual(logger.errors, ["Recording the disconnection of node n1 failed"]);
  });
});

describe("gateway: report intake", () => {
  it("delivers to every handler in order; a throwing one is logged and the rest still receive", () => {
    const logger = recordingLogger();
    const intake = new ReportIntake(logger);
    const seen: string[] = [];
    intake.subscribe((r) => void seen.push(`first ${r.nodeId}`));
    intake.subscribe(() => {
      throw new Error("boom");
    });
    const unsubscribe = intake.subscribe((r) => void seen.push(`third ${r.nodeId}`));
    const report = { nodeId: "n1", sessionId: "s1", message: { payload: "log" } } as unknown as DaemonReport;
    intake.deliver(report);
    assert.deepEqual(seen, ["first n1", "third n1"]);
    assert.deepEqual(logger.errors, ["A daemon report handler failed"]);
    unsubscribe();
    intake.deliver(report);
    assert.deepEqual(seen, ["first n1", "third n1", "first n1"], "an unsubscribed handler receives nothing more");
  });
});

describe("gateway: handshake and join helpers", () => {
  it("takes the node id from the certificate's common name, and none without one", () => {
    assert.equal(nodeIdOfPeerCertificate({ subject: { CN: "node-7" } as never }), "node-7");
    assert.equal(nodeIdOfPeerCertificate({ subject: { CN: ["node-8", "other"] } as never }), "node-8");
    assert.equal(nodeIdOfPeerCertificate({ subject: {} as never }), null);
    assert.equal(nodeIdOfPeerCertificate({}), null);
    assert.equal(nodeIdOfPeerCertificate(undefined), null);
  });

  it("answers a malformed public key with INVALID_ARGUMENT and other refusals with UNAUTHENTICATED", () => {
    assert.equal(joinRefusalStatus("INVALID_PUBLIC_KEY"), grpc.status.INVALID_ARGUMENT);
    assert.equal(joinRefusalStatus("MISSING_TOKEN"), grpc.status.UNAUTHENTICATED);
    assert.equal(joinRefusalStatus("INVALID_NODE_ID"), grpc.status.UNAUTHENTICATED);
  });

  it("tuning: defaults where nothing is configured, configured values win", () => {
    const defaults = resolveGatewayTuning();
    assert.equal(defaults.heartbeatIntervalMs, heartbeatIntervalMsDefault);
    assert.deepEqual(Object.keys(defaults).sort(), [
      "commandTimeoutMs",
      "disconnectAfterMissedPongs",
      "heartbeatIntervalMs",
      "helloTimeoutMs",
      "outboundQueueMessagesMax",
      "pendingCommandsMax",
      "staleAfterMissedPongs",
    ]);
    const tuned = resolveGatewayTuning({ heartbeatIntervalMs: 100, staleAfterMissedPongs: 3 });
    assert.equal(tuned.heartbeatIntervalMs, 100);
    assert.equal(tuned.staleAfterMissedPongs, 3);
    assert.equal(tuned.commandTimeoutMs, defaults.commandTimeoutMs);
  });
});

// The gateway's small parts: per-node record writes in order, report fan-out that survives a
// failing handler, the node id of a client certificate, join refusal statuses and tuning defaults.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { nodeIdOfPeerCertificate } from "../../src/gateway/connect-handshake.js";
import { heartbeatIntervalMsDefault, resolveGatewayTuning, type DaemonReport, type GatewayNodes } from "../../src/gateway/gateway-types.js";
import { joinRefusalStatus } from "../../src/gateway/join-handler.js";
import { NodeWriteQueue } from "../../src/gateway/node-write-queue.js";
import { NodeLivenessRecords } from "../../src/gateway/node-liveness-records.js";
import { ReportIntake } from "../../src/gateway/report-intake.js";
import type { Logger } from "../../src/logs/types.js";
import type { EventBus } from "../../src/events/types.js";
import type { NodeRecord } from "../../src/domain/nodes/node-schemas.js";
import { ApiError } from "../../src/shared/errors.js";
import type { Hello } from "../../src/wire/daemon-proto.js";

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

describe("gateway: a session's opening on the node record", () => {
  const hello: Hello = { protocol_version: 1, daemon_version: "1.0.0", node_id: "n1", total_memory_mb: 1024, used_memory_mb: 0, hostname: "vm" };
  /** Node records whose first `failures` openings fail as a lock still held by a dead controller does. */
  function nodes(failures: number) {
    let attempts = 0;
    const refuse = () => Promise.reject(new Error("not used here"));
    const records: GatewayNodes = {
      upsert: refuse,
      get: refuse,
      endSession: refuse,
      isCertificateRevoked: async () => false,
      onCertificateRevoked: () => () => undefined,
      openSession: async () => {
        attempts++;
        if (attempts <= failures) throw new ApiError(503, "MUTEX_TIMEOUT", "Another controller is changing n1; try again");
        return { record: {} as NodeRecord, sessionEpoch: 7 };
      },
    };
    return { records, attempts: () => attempts };
  }
  function published() {
    const events: Record<string, unknown>[] = [];
    const bus = { publish: (_type: string, data: Record<string, unknown>) => void events.push(data) } as unknown as EventBus;
    return { bus, events };
  }

  it("is tried again while the session is open, so the session gets its epoch (and can be registered)", async () => {
    const { records, attempts } = nodes(2);
    const { bus, events } = published();
    const liveness = new NodeLivenessRecords({ nodes: records, events: bus, logger: recordingLogger(), hasSession: () => true });
    liveness.connected("n1", "s1", hello, new Date(0).toISOString());
    await liveness.settled();
    assert.equal(attempts(), 3);
    assert.equal(liveness.epochOf("s1"), 7);
    assert.equal(events.length, 1);
    assert.equal(events[0].sessionEpoch, 7, "NODE_CONNECTED carries the epoch");
  });

  it("is not tried again once the session ended, nor past its bound", async () => {
    const ended = nodes(1);
    const gone = new NodeLivenessRecords({ nodes: ended.records, events: published().bus, logger: recordingLogger(), hasSession: () => false });
    gone.connected("n1", "s1", hello, new Date(0).toISOString());
    await gone.settled();
    assert.equal(ended.attempts(), 1);
    assert.equal(gone.epochOf("s1"), undefined);

    const failing = nodes(100);
    const logger = recordingLogger();
    const { bus, events } = published();
    const stuck = new NodeLivenessRecords({ nodes: failing.records, events: bus, logger, hasSession: () => true });
    stuck.connected("n1", "s1", hello, new Date(0).toISOString());
    await stuck.settled();
    assert.ok(failing.attempts() > 1 && failing.attempts() < 100, `bounded: ${failing.attempts()} attempts`);
    assert.equal(stuck.epochOf("s1"), undefined);
    assert.equal(events.length, 1, "NODE_CONNECTED is published even so");
    assert.equal(logger.errors.length, 1, "the last failure is logged as an error");
  });
});

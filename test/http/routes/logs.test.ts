/**
 * The log routes on a real server (spec document 2, "Logs"): the controller's ring buffer with its
 * filters, the ticketed SSE tail (replay, then new records), the daemon log mirror of a node (fed
 * through the gateway's intake as a daemon's stream would), permissions and bad input.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { daemonMessage } from "../../../src/wire/daemon-proto.js";
import { clampLogRecord, LOG_RECORD_FIELD_CHARS_MAX } from "../../../src/wire/log-records.js";
import { startTestApp, type TestApp } from "../../support/http-app.js";
import { frameJson, isMessage, openSse, type SseStream } from "../../support/sse-client.js";

describe("log routes", () => {
  let t: TestApp;
  let admin: string;
  const streams: SseStream[] = [];

  before(async () => {
    t = await startTestApp();
    admin = await t.tokenFor("ADMIN");
    await t.nodes.upsert("node-logs", { host: "10.0.0.9" });
  });
  after(async () => {
    for (const stream of streams) stream.close();
    await t.close();
  });

  async function ticket(token = admin): Promise<string> {
    const res = await t.request("GET", "/api/v1/system/logs/ticket", { token });
    assert.equal(res.status, 200, res.text);
    return res.json.ticket as string;
  }

  async function open(path: string, query: Record<string, string> = {}): Promise<SseStream> {
    const params = new URLSearchParams({ ticket: await ticket(), ...query });
    const stream = await openSse(`${t.baseUrl}${path}?${params}`);
    streams.push(stream);
    return stream;
  }

  /** Hands a record to the mirror exactly as the gateway does for a daemon's `log_record`. */
  function daemonLog(nodeId: string, seq: number, level: string, logger: string, message: string, droppedBefore = 0): void {
    const message_ = daemonMessage("log_record", {
      level,
      logger,
      message,
      timestamp_ms: Date.now(),
      seq,
      thread: "main",
      throwable: "",
      mdc: {},
      dropped_before: droppedBefore,
    });
    if (message_.payload !== "log_record") throw new Error("not a log record");
    t.logsAndSharing.onLogRecord(nodeId, clampLogRecord(message_.log_record));
  }

  it("answers the controller's records with size, capacity, level and logger, filtered by level, logger prefix and limit", async () => {
    const probe = t.logs.logger("test.logs.probe");
    probe.info("probe one");
    probe.warn("probe two");
    t.logs.logger("test.logsx").warn("not a child of test.logs");
    probe.error("probe three");

    const all = await t.request("GET", "/api/v1/system/logs", { token: admin });
    assert.equal(all.status, 200, all.text);
    assert.equal(all.json.capacity, 2000);
    assert.equal(all.json.size, all.json.records.length);
    assert.equal(all.json.level, "INFO", "without a filter the controller's level");
    assert.equal(all.json.logger, "");
    const record = all.json.records.find((r: { message: string }) => r.message === "probe one");
    assert.ok(record, "the probe record is buffered");
    assert.deepEqual(Object.keys(record).sort(), ["level", "logger", "message", "seq", "thread", "ts"].sort());

    const filtered = await t.request("GET", "/api/v1/system/logs?level=warn&logger=test.logs", { token: admin });
    assert.equal(filtered.status, 200, filtered.text);
    assert.deepEqual(
      filtered.json.records.map((r: { message: string }) => r.message),
      ["probe two", "probe three"],
    );
    assert.equal(filtered.json.level, "WARN");
    assert.equal(filtered.json.logger, "test.logs");

    const newest = await t.request("GET", "/api/v1/system/logs?logger=test.logs.probe&limit=1", { token: admin });
    assert.deepEqual(
      newest.json.records.map((r: { message: string }) => r.message),
      ["probe three"],
    );
  });

  it("refuses bad query values with the envelope", async () => {
    for (const query of ["level=LOUD", "limit=0", "limit=2001", "limit=abc", "afterSeq=-1"]) {
      const res = await t.request("GET", `/api/v1/system/logs?${query}`, { token: admin });
      assert.equal(res.status, 422, `${query}: ${res.text}`);
      assert.equal(res.json.error.code, "VALIDATION_ERROR");
      assert.equal(res.json.error.status, 422);
    }
  });

  it("is for ADMIN only by default (system.logs.view)", async () => {
    for (const role of ["OPERATOR", "VIEWER"]) {
      const token = await t.tokenFor(role);
      for (const path of ["/api/v1/system/logs", "/api/v1/system/logs/ticket", "/api/v1/nodes/node-logs/logs"]) {
        const res = await t.request("GET", path, { token });
        assert.equal(res.status, 403, `${role} ${path}`);
      }
    }
    assert.equal((await t.request("GET", "/api/v1/system/logs")).status, 401);
  });

  it("streams the buffered records that match, then new ones, once each", async () => {
    const log = t.logs.logger("test.stream");
    log.info("before the stream");
    const stream = await open("/api/v1/system/logs/stream", { logger: "test.stream", level: "INFO" });
    const [connected] = await stream.waitFor(1, (f) => f.event === "connected");
    assert.equal(frameJson(connected!).capacity, 2000);
    await stream.waitFor(1, (f) => isMessage(f) && frameJson(f).message === "before the stream");
    log.debug("below the level");
    log.info("after the stream opened");
    log.warn("and one more");
    const messages = await stream.waitFor(3, isMessage);
    assert.deepEqual(
      messages.map((f) => frameJson(f).message),
      ["before the stream", "after the stream opened", "and one more"],
    );
    for (const frame of messages) assert.equal(frame.id, String(frameJson(frame).seq));
  });

  it("refuses a missing, unknown or used ticket with the error event", async () => {
    const missing = await openSse(`${t.baseUrl}/api/v1/system/logs/stream`);
    streams.push(missing);
    const [error] = await missing.waitFor(1, (f) => f.event === "error");
    assert.deepEqual(frameJson(error!), { message: "Unauthorized" });
    await missing.ended;

    const used = await ticket();
    const first = await openSse(`${t.baseUrl}/api/v1/system/logs/stream?ticket=${used}`);
    streams.push(first);
    await first.waitFor(1, (f) => f.event === "connected");
    const again = await openSse(`${t.baseUrl}/api/v1/system/logs/stream?ticket=${used}`);
    streams.push(again);
    const [refused] = await again.waitFor(1, (f) => f.event === "error");
    assert.deepEqual(frameJson(refused!), { message: "Unauthorized" });
  });

  it("answers a node's mirrored daemon records, filtered, and 404 for an unknown node", async () => {
    daemonLog("node-logs", 1, "INFO", "cloud.daemon", "daemon started");
    daemonLog("node-logs", 2, "WARN", "cloud.daemon.relay", "relay slow", 3);
    daemonLog("node-logs", 3, "LOUD", "cloud.daemon", "x".repeat(LOG_RECORD_FIELD_CHARS_MAX.message + 100));

    const res = await t.request("GET", "/api/v1/nodes/node-logs/logs", { token: admin });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.size, 3);
    assert.deepEqual(
      res.json.records.map((r: { seq: number }) => r.seq),
      [1, 2, 3],
    );
    const clamped = res.json.records[2];
    assert.equal(clamped.level, "INFO", "an unknown level is INFO");
    assert.equal(clamped.message.length, LOG_RECORD_FIELD_CHARS_MAX.message, "the message is clamped");
    assert.equal(t.logsAndSharing.nodeLogs.read("node-logs").droppedOnDaemon, 3);

    const warn = await t.request("GET", "/api/v1/nodes/node-logs/logs?level=WARN&logger=cloud.daemon.relay", { token: admin });
    assert.deepEqual(
      warn.json.records.map((r: { message: string }) => r.message),
      ["relay slow"],
    );
    const after2 = await t.request("GET", "/api/v1/nodes/node-logs/logs?afterSeq=2", { token: admin });
    assert.deepEqual(
      after2.json.records.map((r: { seq: number }) => r.seq),
      [3],
    );

    const unknown = await t.request("GET", "/api/v1/nodes/no-such-node/logs", { token: admin });
    assert.equal(unknown.status, 404, unknown.text);
    assert.equal(unknown.json.error.code, "NOT_FOUND");
    const unknownStream = await t.request("GET", `/api/v1/nodes/no-such-node/logs/stream?ticket=${await ticket()}`, { token: admin });
    assert.equal(unknownStream.status, 404);
  });

  it("tails a node's daemon records as they arrive", async () => {
    await t.nodes.upsert("node-tail", { host: "10.0.0.10" });
    daemonLog("node-tail", 1, "INFO", "cloud.daemon", "held before");
    const stream = await open("/api/v1/nodes/node-tail/logs/stream");
    await stream.waitFor(1, (f) => isMessage(f) && frameJson(f).message === "held before");
    daemonLog("node-tail", 2, "INFO", "cloud.daemon", "sent after");
    daemonLog("node-tail", 3, "DEBUG", "cloud.daemon", "debug too");
    const messages = await stream.waitFor(3, isMessage);
    assert.deepEqual(
      messages.map((f) => frameJson(f).message),
      ["held before", "sent after", "debug too"],
    );
  });
});

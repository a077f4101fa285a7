import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { setTimeout as sleep } from "node:timers/promises";
import { FakeClock } from "../support/fake-clock.js";
import {
  createLogService,
  formatThrowable,
  isPinnedLogger,
  LOG_BUFFER_CAPACITY_RECORDS,
  PINNED_LOGGERS,
  type LogServiceOptions,
} from "../../src/logs/logger.js";
import { experimental, logVerbosity } from "@grpc/grpc-js";
import { mongoLogOptions, routeGrpcLogs, routeProcessWarnings, routeRedisClientLogs } from "../../src/logs/third-party.js";

/** Collects written lines. */
function capture() {
  const chunks: string[] = [];
  return {
    out: { write: (chunk: string) => chunks.push(chunk) },
    text: () => chunks.join(""),
    lines: () =>
      chunks
        .join("")
        .split("\n")
        .filter((l) => l !== ""),
  };
}

const T0 = Date.UTC(2026, 0, 2, 3, 4, 5, 6); // 2026-01-02T03:04:05.006Z

function service(opts: Partial<LogServiceOptions> = {}) {
  const sink = capture();
  const clock = new FakeClock(T0);
  const logs = createLogService({ level: "INFO", format: "JSON", clock, ...opts }, sink.out);
  return { logs, sink, clock };
}

describe("JSON format", () => {
  it("writes exactly timestamp, level, logger, thread, message in that order", () => {
    const { logs, sink } = service();
    logs.logger("cloud.http.routes.groups").info("Group created");
    const [line] = sink.lines();
    assert.equal(line, '{"timestamp":"2026-01-02T03:04:05.006Z","level":"INFO","logger":"cloud.http.routes.groups","thread":"main","message":"Group created"}');
    assert.deepEqual(Object.keys(JSON.parse(line)), ["timestamp", "level", "logger", "thread", "message"]);
  });

  it("adds mdc when non-empty and exception when a throwable is attached, in that order", () => {
    const { logs, sink } = service();
    const err = new Error("disk full", { cause: new Error("ENOSPC") });
    logs.withMdc({ requestId: "r-1", correlationId: "c-1" }, () => logs.logger("cloud.store").error("Write failed", err));
    const parsed = JSON.parse(sink.lines()[0]);
    assert.deepEqual(Object.keys(parsed), ["timestamp", "level", "logger", "thread", "message", "mdc", "exception"]);
    assert.deepEqual(parsed.mdc, { requestId: "r-1", correlationId: "c-1" });
    assert.equal(parsed.level, "ERROR");
    assert.match(parsed.exception, /^Error: disk full\n\s+at /);
    assert.match(parsed.exception, /\nCaused by: Error: ENOSPC/);
  });

  it("omits mdc when empty and exception when none; escapes quotes and newlines", () => {
    const { logs, sink } = service();
    logs.withMdc({}, () => logs.logger("a.b").warn('say "hi"\nnext'));
    const parsed = JSON.parse(sink.lines()[0]);
    assert.deepEqual(Object.keys(parsed), ["timestamp", "level", "logger", "thread", "message"]);
    assert.equal(parsed.message, 'say "hi"\nnext');
    assert.equal(sink.lines().length, 1, "one object per line");
  });

  it("formats the timestamp in UTC with milliseconds from the injected clock", () => {
    const { logs, sink, clock } = service();
    clock.set(Date.UTC(2030, 11, 31, 23, 59, 59, 999));
    logs.logger("x").info("m");
    assert.equal(JSON.parse(sink.lines()[0]).timestamp, "2030-12-31T23:59:59.999Z");
  });
});

describe("HUMAN format", () => {
  it("writes date-time with millis, [thread], level padded to 5, last logger segment, dash, message", () => {
    const { logs, sink } = service({ format: "HUMAN" });
    logs.withMdc({ requestId: "r-1" }, () => logs.logger("cloud.http.routes.groups").info("Group created"));
    logs.logger("cloud.scheduler").warn("Tick slow");
    logs.logger("plain").error("Boom");
    assert.deepEqual(sink.lines(), [
      "2026-01-02 03:04:05.006 [main] INFO  groups - Group created",
      "2026-01-02 03:04:05.006 [main] WARN  scheduler - Tick slow",
      "2026-01-02 03:04:05.006 [main] ERROR plain - Boom",
    ]);
    assert.doesNotMatch(sink.text(), /r-1/, "HUMAN does not print MDC");
  });

  it("prints an attached stack trace on the following lines", () => {
    const { logs, sink } = service({ format: "HUMAN" });
    logs.logger("a.b").error("Failed", new Error("bad"));
    const lines = sink.lines();
    assert.equal(lines[0], "2026-01-02 03:04:05.006 [main] ERROR b - Failed");
    assert.equal(lines[1], "Error: bad");
  });

  it("falls back to HUMAN for an unknown format", () => {
    assert.equal(service({ format: "xml" }).logs.format, "HUMAN");
  });
});

describe("levels", () => {
  it("drops records below the configured level", () => {
    const { logs, sink } = service({ level: "WARN" });
    const log = logs.logger("cloud.x");
    log.trace("t");
    log.debug("d");
    log.info("i");
    log.warn("w");
    log.error("e");
    assert.deepEqual(
      sink.lines().map((l) => JSON.parse(l).level),
      ["WARN", "ERROR"],
    );
    assert.equal(logs.recent().length, 2);
  });

  it("emits TRACE when configured and treats unknown levels as INFO", () => {
    assert.equal(service({ level: "trace" }).logs.level, "TRACE");
    const { logs, sink } = service({ level: "LOUD" });
    assert.equal(logs.level, "INFO");
    logs.logger("x").debug("hidden");
    logs.logger("x").info("shown");
    assert.equal(sink.lines().length, 1);
  });

  it("pins the four third-party loggers to WARN whatever the level", () => {
    for (const level of ["TRACE", "DEBUG", "INFO"]) {
      const { logs, sink } = service({ level });
      for (const name of Object.values(PINNED_LOGGERS)) {
        const log = logs.logger(name);
        log.trace("t");
        log.debug("d");
        log.info("i");
        log.warn("w");
        logs.logger(`${name}.child`).info("child info");
        logs.logger(`${name}.child`).warn("child warn");
      }
      assert.deepEqual(
        sink.lines().map((l) => JSON.parse(l).level),
        Object.values(PINNED_LOGGERS).flatMap(() => ["WARN", "WARN"]),
        `level ${level}`,
      );
    }
    const { logs, sink } = service({ level: "ERROR" });
    logs.logger(PINNED_LOGGERS.grpc).warn("pinned at WARN even when the level is ERROR");
    assert.equal(sink.lines().length, 1);
    assert.ok(isPinnedLogger("io.grpc"));
    assert.ok(!isPinnedLogger("io.grpcx"));
    assert.deepEqual(Object.values(PINNED_LOGGERS), ["io.grpc", "org.mongodb.driver", "io.redis", "node.process"]);
  });
});

describe("MDC and thread", () => {
  it("isolates MDC across concurrent async contexts and clears it afterwards", async () => {
    const { logs } = service();
    const log = logs.logger("cloud.http");
    const request = (id: string, delayMs: number) =>
      logs.withMdc({ requestId: id }, async () => {
        await sleep(delayMs);
        log.info(`start ${id}`);
        await sleep(delayMs);
        assert.deepEqual(logs.mdc(), { requestId: id });
        log.info(`end ${id}`);
      });
    await Promise.all([request("a", 5), request("b", 1), request("c", 3)]);
    for (const record of logs.recent()) {
      assert.equal(record.mdc?.requestId, record.message.split(" ")[1]);
    }
    assert.equal(logs.recent().length, 6);
    assert.deepEqual(logs.mdc(), {}, "no MDC outside the request");
    log.info("outside");
    assert.equal(logs.recent().at(-1)?.mdc, undefined);
  });

  it("merges nested MDC and restores the outer one", () => {
    const { logs } = service();
    logs.withMdc({ a: "1" }, () => {
      logs.withMdc({ b: "2" }, () => assert.deepEqual(logs.mdc(), { a: "1", b: "2" }));
      assert.deepEqual(logs.mdc(), { a: "1" });
    });
  });

  it("names the thread main by default and after withThread the given name, keeping MDC", () => {
    const { logs, sink } = service();
    assert.equal(logs.thread(), "main");
    logs.withMdc({ k: "v" }, () =>
      logs.withThread("scheduler", () => {
        logs.logger("cloud.scheduler").info("tick");
        assert.deepEqual(logs.mdc(), { k: "v" });
      }),
    );
    const parsed = JSON.parse(sink.lines()[0]);
    assert.equal(parsed.thread, "scheduler");
    assert.deepEqual(parsed.mdc, { k: "v" });
  });
});

describe("ring buffer", () => {
  it("keeps the last 2,000 records oldest first with sequence numbers", () => {
    const { logs } = service();
    assert.equal(logs.capacity, LOG_BUFFER_CAPACITY_RECORDS);
    assert.equal(logs.capacity, 2000);
    const log = logs.logger("cloud.bulk");
    for (let i = 1; i <= 2500; i++) log.info(`m${i}`);
    const recent = logs.recent();
    assert.equal(recent.length, 2000);
    assert.equal(recent[0].message, "m501");
    assert.equal(recent[0].seq, 501);
    assert.equal(recent.at(-1)?.message, "m2500");
    assert.equal(recent.at(-1)?.seq, 2500);
  });

  it("stores seq, ts, level, logger, thread, message, throwable and mdc", () => {
    const { logs } = service();
    logs.withMdc({ requestId: "r" }, () => logs.logger("cloud.a").error("oops", new Error("x")));
    const [record] = logs.recent();
    assert.equal(record.seq, 1);
    assert.equal(record.ts, T0);
    assert.equal(record.level, "ERROR");
    assert.equal(record.logger, "cloud.a");
    assert.equal(record.thread, "main");
    assert.equal(record.message, "oops");
    assert.match(record.throwable ?? "", /^Error: x/);
    assert.deepEqual(record.mdc, { requestId: "r" });
  });

  it("tails new records until unsubscribed; a throwing listener does not break logging", () => {
    const { logs, sink } = service();
    const seen: string[] = [];
    const stopBad = logs.tail(() => {
      throw new Error("closed stream");
    });
    const stop = logs.tail((r) => seen.push(r.message));
    logs.logger("x").info("one");
    stop();
    stopBad();
    logs.logger("x").info("two");
    assert.deepEqual(seen, ["one"]);
    assert.equal(sink.lines().length, 2);
  });
});

describe("third-party adapters", () => {
  it("formats non-Error throwables", () => {
    assert.equal(formatThrowable("plain"), "plain");
    assert.equal(formatThrowable({ code: 1 }), '{"code":1}');
  });

  it("routes @grpc/grpc-js logs to io.grpc, errors as WARN, info below the pin", () => {
    const { logs } = service({ level: "TRACE" });
    routeGrpcLogs(logs);
    experimental.log(logVerbosity.ERROR, "subchannel connect failed");
    experimental.log(logVerbosity.INFO, "resolver update");
    assert.deepEqual(
      logs.recent().map((r) => [r.logger, r.level]),
      [["io.grpc", "WARN"]],
    );
    assert.match(logs.recent()[0].message, /subchannel connect failed/);
  });

  it("routes ioredis events to io.redis at WARN", () => {
    const { logs } = service({ level: "TRACE" });
    const client = new EventEmitter();
    routeRedisClientLogs(client, logs, "leases");
    client.emit("error", new Error("ECONNREFUSED"));
    client.emit("reconnecting", 100);
    const records = logs.recent();
    assert.equal(records.length, 1, "reconnecting (INFO) is below the pin");
    assert.equal(records[0].logger, "io.redis.leases");
    assert.equal(records[0].level, "WARN");
    assert.match(records[0].throwable ?? "", /ECONNREFUSED/);
  });

  it("builds MongoClient options that route driver logs to org.mongodb.driver", () => {
    const { logs } = service();
    const options = mongoLogOptions(logs);
    assert.deepEqual(options.mongodbLogComponentSeverities, { default: "warn" });
    const writable = options.mongodbLogPath as { write(log: unknown): void };
    writable.write({ t: new Date(), c: "topology", s: "warn", message: "Server selection slow" });
    writable.write({ t: new Date(), c: "connection", s: "error", message: "Connection closed" });
    assert.deepEqual(
      logs.recent().map((r) => [r.logger, r.level, r.message]),
      [
        ["org.mongodb.driver", "WARN", "[topology] Server selection slow"],
        ["org.mongodb.driver", "ERROR", "[connection] Connection closed"],
      ],
    );
  });

  it("routes process warnings to node.process.warning instead of stderr", () => {
    const { logs } = service();
    const proc = new EventEmitter();
    proc.on("warning", () => assert.fail("default printer must be removed"));
    routeProcessWarnings(logs, proc as never);
    const warning = new Error("Buffer() is deprecated");
    warning.name = "DeprecationWarning";
    proc.emit("warning", warning);
    assert.deepEqual(
      logs.recent().map((r) => [r.logger, r.level, r.message]),
      [["node.process.warning", "WARN", "DeprecationWarning: Buffer() is deprecated"]],
    );
  });
});

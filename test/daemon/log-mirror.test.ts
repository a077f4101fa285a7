// The daemon log appender alone, on the fake clock: records are clamped and numbered, wait in a
// bounded queue while the stream does not take them (the oldest give way and the next record sent
// says how many), and go out in order once it does.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { DaemonLogMirror, LOG_MIRROR_RETRY_MS, mirroredLogger } from "../../src/daemon/log-mirror.js";
import type { DaemonMessage, LogRecordMessage } from "../../src/wire/daemon-proto.js";
import { LOG_RECORD_FIELD_CHARS_MAX } from "../../src/wire/log-records.js";
import { FakeClock } from "../support/fake-clock.js";

function harness(queueRecordsMax = 5) {
  const clock = new FakeClock(1_000_000);
  const sent: LogRecordMessage[] = [];
  let accepting = false;
  const mirror = new DaemonLogMirror({
    clock,
    queueRecordsMax,
    send: (message: DaemonMessage) => {
      if (!accepting || message.payload !== "log_record") return false;
      sent.push(message.log_record);
      return true;
    },
  });
  return { clock, sent, mirror, accept: (on: boolean) => (accepting = on) };
}

describe("daemon log mirror", () => {
  it("sends clamped, numbered records in order once the stream takes them", () => {
    const { clock, sent, mirror, accept } = harness();
    const lines: string[] = [];
    const logger = mirroredLogger({ info: (m) => lines.push(m), warn: (m) => lines.push(m), error: (m) => lines.push(m) }, mirror);
    logger.info("one");
    logger.warn("x".repeat(LOG_RECORD_FIELD_CHARS_MAX.message * 2));
    logger.error("three");
    clock.advance(LOG_MIRROR_RETRY_MS * 3);
    assert.equal(sent.length, 0, "nothing goes while the stream takes nothing");
    assert.equal(lines.length, 3, "the local output is not held back");
    accept(true);
    clock.advance(LOG_MIRROR_RETRY_MS);
    assert.deepEqual(
      sent.map((r) => [r.seq, r.level, r.logger]),
      [
        [1, "INFO", "cloud.daemon"],
        [2, "WARN", "cloud.daemon"],
        [3, "ERROR", "cloud.daemon"],
      ],
    );
    assert.equal(sent[1]!.message.length, LOG_RECORD_FIELD_CHARS_MAX.message);
    assert.equal(sent[0]!.timestamp_ms, 1_000_000);
    assert.deepEqual(mirror.stats, { sent: 3, dropped: 0, queued: 0 });
  });

  it("keeps at most the queue bound while the stream is busy; the next record sent counts what was dropped", () => {
    const { clock, sent, mirror, accept } = harness(5);
    for (let i = 1; i <= 12; i++) mirror.append("INFO", "cloud.daemon", `line ${i}`);
    clock.advance(LOG_MIRROR_RETRY_MS * 2);
    assert.deepEqual(mirror.stats, { sent: 0, dropped: 7, queued: 5 });
    accept(true);
    mirror.wake();
    clock.advance(0);
    assert.deepEqual(
      sent.map((r) => r.message),
      ["line 8", "line 9", "line 10", "line 11", "line 12"],
    );
    assert.deepEqual(
      sent.map((r) => r.dropped_before),
      [7, 0, 0, 0, 0],
    );
  });
});

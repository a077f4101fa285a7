// The controller side of the daemon log mirror alone: each node's buffer keeps at most its records
// and characters (oldest first out), at most so many nodes are kept (the least recently written
// one goes, unless it is tailed), reads filter like the routes, tails see every new record.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { NodeLogBuffers } from "../../src/logs/node-log-buffers.js";
import type { LogRecord } from "../../src/logs/types.js";
import { redactText, redactValue, REDACTED } from "../../src/diagnostics/redaction.js";

const record = (seq: number, message = `m${seq}`, level: LogRecord["level"] = "INFO"): LogRecord => ({
  seq,
  ts: seq,
  level,
  logger: "cloud.daemon",
  thread: "main",
  message,
});

describe("node log buffers", () => {
  it("keep at most recordsMax records and charsMax characters per node, newest kept", () => {
    const buffers = new NodeLogBuffers({ recordsMax: 5, charsMax: 1_000, buffersMax: 4 });
    for (let seq = 1; seq <= 12; seq++) buffers.append("a", record(seq));
    assert.deepEqual(
      buffers.read("a").records.map((r) => r.seq),
      [8, 9, 10, 11, 12],
    );
    for (let seq = 13; seq <= 15; seq++) buffers.append("a", record(seq, "x".repeat(400)));
    const read = buffers.read("a");
    assert.deepEqual(
      read.records.map((r) => r.seq),
      [14, 15],
      "two 400-character records and their names fit in 1,000 characters, three do not",
    );
    assert.ok(buffers.totalChars() <= 1_000);
    assert.deepEqual(buffers.read("a", { level: "WARN" }).records, []);
  });

  it("keep at most buffersMax nodes, dropping the least recently written one that nobody tails", () => {
    const buffers = new NodeLogBuffers({ recordsMax: 5, charsMax: 1_000, buffersMax: 2 });
    const seen: number[] = [];
    const stop = buffers.tail("tailed", (r) => seen.push(r.seq));
    buffers.append("tailed", record(1));
    buffers.append("b", record(1));
    buffers.append("c", record(1));
    assert.equal(buffers.has("tailed"), true, "a tailed buffer stays");
    assert.equal(buffers.has("b"), false, "the least recently written untailed buffer went");
    assert.equal(buffers.has("c"), true);
    buffers.append("tailed", record(2, "m2", "DEBUG"));
    assert.deepEqual(seen, [1, 2]);
    stop();
    buffers.append("tailed", record(3));
    assert.deepEqual(seen, [1, 2], "no delivery after the tail stopped");
  });
});

describe("redaction", () => {
  it("removes URI credentials, bearer tokens, private keys, the generated-password line and known secrets", () => {
    const text = [
      "redis://user:pw@cache:6379/0 and postgres://only-user@db/x",
      "Authorization: Bearer abc.def-ghi",
      "-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----",
      "Created initial admin user 'admin' with generated password: Zx9kQ2 (shown only once)",
      "the seed is s3cr3t-seed-value",
    ].join("\n");
    const out = redactText(text, ["s3cr3t-seed-value", "abc"]);
    assert.equal(
      out,
      [
        `redis://${REDACTED}@cache:6379/0 and postgres://${REDACTED}@db/x`,
        `Authorization: Bearer ${REDACTED}`,
        REDACTED,
        `Created initial admin user 'admin' with generated password: ${REDACTED} (shown only once)`,
        `the seed is ${REDACTED}`,
      ].join("\n"),
      "a known secret shorter than 6 characters is not searched for",
    );
  });

  it("replaces values under secret-named keys whole, keeps fencing tokens and booleans", () => {
    const value = redactValue({
      auth: { adminPassword: "p", tokenTtlSeconds: 60 },
      lease: { fencingToken: 7 },
      share: { enabled: true },
      apiKey: "k",
      list: ["x://u:p@h"],
    });
    assert.deepEqual(value, {
      auth: { adminPassword: REDACTED, tokenTtlSeconds: 60 },
      lease: { fencingToken: 7 },
      share: { enabled: true },
      apiKey: REDACTED,
      list: [`x://${REDACTED}@h`],
    });
  });
});

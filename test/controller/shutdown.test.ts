import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { exitOnSignals } from "../../src/controller/shutdown.js";
import { SIGNAL_ECHO_WINDOW_MS } from "../../src/shared/signals.js";
import { FakeClock } from "../support/fake-clock.js";
import { urlForAddress } from "../../src/controller/controller.js";
import type { Logger } from "../../src/logs/types.js";

/** A stand-in for `process`: records exit codes and stderr instead of exiting. */
function fakeProcess() {
  const proc = new EventEmitter() as EventEmitter & { exits: number[]; stderrText: string };
  proc.exits = [];
  proc.stderrText = "";
  Object.assign(proc, {
    exit: (code: number) => {
      proc.exits.push(code);
    },
    stderr: { write: (s: string) => (proc.stderrText += s) },
  });
  return proc;
}

function recordingLogger() {
  const messages: string[] = [];
  const at = (level: string) => (message: string) => messages.push(`${level} ${message}`);
  const logger: Logger = { name: "t", trace: at("TRACE"), debug: at("DEBUG"), info: at("INFO"), warn: at("WARN"), error: at("ERROR") };
  return { logger, messages };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe("exitOnSignals", () => {
  it("stops once and exits 0 on SIGTERM", async () => {
    const proc = fakeProcess();
    const { logger, messages } = recordingLogger();
    let stops = 0;
    exitOnSignals(
      async () => void stops++,
      () => logger,
      proc as unknown as NodeJS.Process,
    );
    proc.emit("SIGTERM", "SIGTERM");
    await settle();
    assert.equal(stops, 1);
    assert.deepEqual(proc.exits, [0]);
    assert.deepEqual(messages, ["INFO Received SIGTERM; shutting down"]);
  });

  it("exits 1 when stop fails", async () => {
    const proc = fakeProcess();
    const { logger, messages } = recordingLogger();
    exitOnSignals(
      async () => Promise.reject(new Error("store stuck")),
      () => logger,
      proc as unknown as NodeJS.Process,
    );
    proc.emit("SIGINT", "SIGINT");
    await settle();
    assert.deepEqual(proc.exits, [1]);
    assert.ok(messages.includes("ERROR Shutdown failed"));
  });

  it("exits 130 at once on a second signal, and ignores the echoes of the first", async () => {
    const proc = fakeProcess();
    const { logger, messages } = recordingLogger();
    const clock = new FakeClock(1_000_000);
    let release!: () => void;
    let stops = 0;
    exitOnSignals(
      () => {
        stops++;
        return new Promise<void>((r) => (release = r));
      },
      () => logger,
      proc as unknown as NodeJS.Process,
      clock,
    );
    // One Ctrl-C under `npm start`: the terminal's group signal, then npm's relay, then a SIGTERM.
    proc.emit("SIGINT", "SIGINT");
    proc.emit("SIGINT", "SIGINT");
    clock.advance(SIGNAL_ECHO_WINDOW_MS - 1);
    proc.emit("SIGTERM", "SIGTERM");
    assert.deepEqual(proc.exits, [], "echoes of the first signal do not force the exit");
    assert.equal(stops, 1);
    clock.advance(1);
    proc.emit("SIGINT", "SIGINT");
    assert.deepEqual(proc.exits, [130]);
    assert.deepEqual(messages, ["INFO Received SIGINT; shutting down", "WARN Received SIGINT again; exiting now"]);
    release();
    await settle();
  });

  it("writes to standard error while logging does not exist yet", async () => {
    const proc = fakeProcess();
    exitOnSignals(
      async () => undefined,
      () => undefined,
      proc as unknown as NodeJS.Process,
    );
    proc.emit("SIGTERM", "SIGTERM");
    await settle();
    assert.match(proc.stderrText, /Received SIGTERM; shutting down/);
    assert.deepEqual(proc.exits, [0]);
  });
});

describe("urlForAddress", () => {
  it("maps wildcard binds to loopback and brackets IPv6", () => {
    assert.equal(urlForAddress({ address: "0.0.0.0", family: "IPv4", port: 8080 }), "http://127.0.0.1:8080");
    assert.equal(urlForAddress({ address: "::", family: "IPv6", port: 8080 }), "http://[::1]:8080");
    assert.equal(urlForAddress({ address: "127.0.0.1", family: "IPv4", port: 1 }), "http://127.0.0.1:1");
    assert.equal(urlForAddress({ address: "fd00::5", family: "IPv6", port: 9 }), "http://[fd00::5]:9");
  });
});

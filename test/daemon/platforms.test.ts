// The pure pieces of the daemon's process side: platform validation and rendering, the properties
// port patch, the console ring buffer and line splitter, and crash classification.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { describe, it } from "node:test";
import { ConsoleRingBuffer, LineSplitter } from "../../src/daemon/console-buffer.js";
import { classifyExit } from "../../src/daemon/crash-classification.js";
import {
  builtInPlatforms,
  patchPropertiesPort,
  renderCommand,
  simulatedPlatform,
  validatePlatform,
  type PlatformDefinition,
} from "../../src/daemon/platforms.js";
import { RunnerError } from "../../src/daemon/runner-errors.js";
import { isProxyPlatform } from "../../src/plugin-api/players.js";

const values = { memoryMb: 1024, jarFile: "server.jar", port: 30001, instanceId: "lobby-1", group: "lobby", workDir: "/srv/lobby-1" };

describe("platforms", () => {
  it("ships simulated, simulated-proxy, simulated-standalone, paper and velocity as valid data", () => {
    const platforms = builtInPlatforms();
    assert.deepEqual([...platforms.keys()], ["simulated", "simulated-proxy", "simulated-standalone", "paper", "velocity"]);
    // The proxy is the simulated server in proxy mode, with plugin readiness like the server.
    const proxy = platforms.get("simulated-proxy")!;
    assert.deepEqual(proxy.env, { CLOUD_SIM_MODE: "proxy" });
    assert.deepEqual(proxy.command, platforms.get("simulated")!.command);
    assert.deepEqual(proxy.readiness, { kind: "plugin" });
    assert.ok(isProxyPlatform(proxy.id), "the controller counts its instances as proxies");
    assert.ok(!isProxyPlatform("simulated"));
    assert.deepEqual(renderCommand(platforms.get("paper")!, values), ["java", "-Xmx1024M", "-jar", "server.jar", "nogui"]);
    assert.deepEqual(renderCommand(platforms.get("velocity")!, values), ["java", "-Xmx1024M", "-jar", "server.jar", "--port", "30001"]);
    assert.equal(platforms.get("paper")!.stopCommand, "stop");
    assert.equal(platforms.get("velocity")!.stopCommand, "end");
    assert.deepEqual(platforms.get("simulated-standalone")!.readiness, { kind: "log-line", pattern: "Done (" });
    const simulated = platforms.get("simulated")!;
    assert.equal(simulated.command[0], process.execPath);
    assert.ok(existsSync(simulated.command[1]));
  });

  it("refuses unknown placeholders, arg passing without {port}, file passing without a file, bad timeouts", () => {
    const invalid = (patch: Partial<PlatformDefinition>) =>
      assert.throws(
        () => validatePlatform({ ...simulatedPlatform(), ...patch }),
        (error: RunnerError) => error.code === "INVALID_PLATFORM",
      );
    invalid({ command: ["java", "-Xmx{memory}M"] });
    invalid({ portPassing: "arg" });
    invalid({ portPassing: "file" });
    invalid({ portPassing: "file", portFile: { path: "../server.properties", key: "server-port" } });
    invalid({ stopTimeoutMs: -1 });
    invalid({ termTimeoutMs: 1.5 });
    invalid({ readiness: { kind: "log-line", pattern: "" } });
    invalid({ id: "Bad Id" });
    invalid({ command: [] });
  });

  it("patches the port into a properties file, keeping every other line", () => {
    assert.equal(patchPropertiesPort(null, "server-port", 30001), "server-port=30001\n");
    assert.equal(
      patchPropertiesPort("motd=Hi\nserver-port=25565\nonline-mode=false\n", "server-port", 30001),
      "motd=Hi\nserver-port=30001\nonline-mode=false\n",
    );
    assert.equal(patchPropertiesPort("motd=Hi\r\n", "server-port", 7), "motd=Hi\nserver-port=7\n");
    assert.equal(patchPropertiesPort("a.b=1\naxb=2\n", "a.b", 9), "a.b=9\naxb=2\n");
  });
});

describe("console buffer", () => {
  it("keeps the last capacityLines lines, oldest first", () => {
    const ring = new ConsoleRingBuffer(3);
    for (let i = 1; i <= 5; i += 1) ring.push({ line: `l${i}`, stream: "stdout", timestampMs: i });
    assert.deepEqual(
      ring.tail().map((entry) => entry.line),
      ["l3", "l4", "l5"],
    );
    assert.deepEqual(
      ring.tail(2).map((entry) => entry.line),
      ["l4", "l5"],
    );
    assert.equal(ring.size, 3);
    assert.throws(() => new ConsoleRingBuffer(0), RangeError);
  });

  it("splits chunks into lines, handles CRLF, split UTF-8 and cuts endless lines", () => {
    const lines: string[] = [];
    const splitter = new LineSplitter(8, (line) => lines.push(line));
    const euro = Buffer.from("€");
    splitter.write(Buffer.from("one\r\ntw"));
    splitter.write(Buffer.concat([Buffer.from("o "), euro.subarray(0, 1)]));
    splitter.write(Buffer.concat([euro.subarray(1), Buffer.from("\n\n")]));
    splitter.write(Buffer.from("abcdefghijklmnopq"));
    splitter.write(Buffer.from("r"));
    splitter.end();
    assert.deepEqual(lines, ["one", "two €", "", "abcdefgh", "ijklmnop", "qr"]);
  });
});

describe("crash classification", () => {
  const facts = { exitCode: null, signal: null, logTail: [] as string[], killSentByDaemon: false };
  it("classifies by log line, unrequested SIGKILL or 137, other signals, exit 0 and error codes", () => {
    assert.equal(classifyExit({ ...facts, exitCode: 1, logTail: ["java.lang.OutOfMemoryError: Java heap space"] }), "OUT_OF_MEMORY");
    assert.equal(classifyExit({ ...facts, signal: "SIGKILL" }), "OUT_OF_MEMORY");
    assert.equal(classifyExit({ ...facts, exitCode: 137 }), "OUT_OF_MEMORY");
    assert.equal(classifyExit({ ...facts, signal: "SIGKILL", killSentByDaemon: true }), "SIGNAL");
    assert.equal(classifyExit({ ...facts, signal: "SIGSEGV" }), "SIGNAL");
    assert.equal(classifyExit({ ...facts, exitCode: 0 }), "NORMAL_EXIT_UNEXPECTED");
    assert.equal(classifyExit({ ...facts, exitCode: 3 }), "ERROR_EXIT");
  });
});

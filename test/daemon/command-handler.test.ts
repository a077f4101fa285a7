// The command handler against a recording runner (no processes), the wire → runner spec mapping,
// and the controller endpoint derived from the dialled gRPC address and hello_ack.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createCommandHandler, toRunnerSpec, type CommandRunner } from "../../src/daemon/command-handler.js";
import { ControllerEndpoint, controllerHttpBaseUrl, grpcAddressHost } from "../../src/daemon/controller-endpoint.js";
import type { CommandHandler } from "../../src/daemon/gateway-client.js";
import { recentEndsMax, recentEndsRetentionMs } from "../../src/daemon/instance-listing.js";
import type { InstanceExit, InstanceRunState, InstanceSnapshot, InstanceSpec, RunnerEvent } from "../../src/daemon/instance-runner.js";
import { builtInPlatforms } from "../../src/daemon/platforms.js";
import { RunnerError, StaleEpochError } from "../../src/daemon/runner-errors.js";
import type { HelloAck } from "../../src/wire/daemon-proto.js";
import { wireSpec } from "./fake-controller.js";

/** Keeps instances as snapshots, applies the fencing rule, records calls; stops never finish. */
class RecordingRunner implements CommandRunner {
  calls: string[] = [];
  instances = new Map<string, InstanceSnapshot>();
  tokens = new Map<string, number>();
  private readonly platforms = builtInPlatforms();

  validate(spec: InstanceSpec) {
    const platform = this.platforms.get(spec.platform);
    if (!platform) throw new RunnerError("UNKNOWN_PLATFORM", `Unknown platform ${spec.platform}`);
    return platform;
  }
  observeFencingToken(group: string, token: number): void {
    const highest = this.tokens.get(group);
    if (highest !== undefined && token < highest) throw new StaleEpochError(group, token, highest);
    this.tokens.set(group, Math.max(token, highest ?? token));
  }
  start(spec: InstanceSpec, token: number): InstanceSnapshot {
    this.validate(spec);
    if (this.instances.has(spec.instanceId)) throw new RunnerError("INSTANCE_EXISTS", "exists");
    this.observeFencingToken(spec.group, token);
    const snapshot = {
      instanceId: spec.instanceId,
      group: spec.group,
      platform: spec.platform,
      state: "PREPARING" as InstanceRunState,
      port: spec.port,
      pid: null,
      workDir: "/w",
      static: false,
      spawnedAtMs: null,
      readyAtMs: null,
    };
    this.instances.set(spec.instanceId, snapshot);
    this.calls.push(`start ${spec.instanceId}`);
    return snapshot;
  }
  snapshot(instanceId: string): InstanceSnapshot {
    const snapshot = this.instances.get(instanceId);
    if (!snapshot) throw new RunnerError("UNKNOWN_INSTANCE", `No instance ${instanceId} on this node`);
    return snapshot;
  }
  private fenced(instanceId: string, token: number): InstanceSnapshot {
    const snapshot = this.snapshot(instanceId);
    this.observeFencingToken(snapshot.group, token);
    return snapshot;
  }
  stop(instanceId: string, token: number): Promise<InstanceExit> {
    this.fenced(instanceId, token).state = "STOPPING";
    this.calls.push(`stop ${instanceId}`);
    return new Promise(() => undefined);
  }
  forceStop(instanceId: string, token: number): Promise<InstanceExit> {
    this.fenced(instanceId, token).state = "STOPPING";
    this.calls.push(`forceStop ${instanceId}`);
    return new Promise(() => undefined);
  }
  writeStdin(instanceId: string, line: string, token: number): void {
    this.fenced(instanceId, token);
    this.calls.push(`stdin ${instanceId} ${line}`);
  }
  markReady(instanceId: string, token: number): void {
    this.fenced(instanceId, token).state = "RUNNING";
    this.calls.push(`ready ${instanceId}`);
  }
  list(): InstanceSnapshot[] {
    return [...this.instances.values()];
  }
  listeners = new Set<(event: RunnerEvent) => void>();
  subscribe(listener: (event: RunnerEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
  highestFencingToken(group: string): number | undefined {
    return this.tokens.get(group);
  }
  /** Ends an instance as the runner does: gone from the list, then the crash and the final state. */
  end(instanceId: string, state: "STOPPED" | "CRASHED", exitCode: number, atMs: number): void {
    const snapshot = this.snapshot(instanceId);
    this.instances.delete(instanceId);
    if (state === "CRASHED") {
      const report = {
        instanceId,
        group: snapshot.group,
        exitCode,
        signal: null,
        classification: "ERROR_EXIT" as const,
        logTail: [],
        uptimeMs: 1,
        timestampMs: atMs,
      };
      for (const listener of this.listeners) listener({ type: "crash", report });
    }
    for (const listener of this.listeners) {
      listener({ type: "state", instanceId, group: snapshot.group, state, previousState: snapshot.state, timestampMs: atMs, port: snapshot.port, exitCode });
    }
  }
}

function handlerWith(runner: RecordingRunner, controllerUrl: string | null = "http://10.0.0.1:8080"): CommandHandler {
  return createCommandHandler({ runner, controllerUrl: () => controllerUrl });
}

const header = (fencingToken = 3) => ({ commandId: "c1", body: { command_id: "c1", group: "lobby", fencing_token: fencingToken } });

describe("wire spec → runner spec", () => {
  it("maps every field; empty strings are unset; the daemon's controller URL fills an empty one", () => {
    const wire = wireSpec("i-1", 30_000, {
      platform: "paper",
      memory_mb: 1024,
      static: true,
      environment: { A: "1" },
      variables: { motd: "hi" },
      templates: [
        { name: "base", hash: "" },
        { name: "lobby", hash: "a".repeat(64) },
      ],
      jar_file: "paper.jar",
      workload_token: "wt",
    });
    assert.deepEqual(toRunnerSpec(wire, "http://c:8080"), {
      instanceId: "i-1",
      group: "lobby",
      platform: "paper",
      port: 30_000,
      memoryMb: 1024,
      static: true,
      templates: [{ name: "base" }, { name: "lobby", hash: "a".repeat(64) }],
      env: { A: "1" },
      variables: { motd: "hi" },
      jarFile: "paper.jar",
      workloadToken: "wt",
      controllerUrl: "http://c:8080",
    });
    const plain = toRunnerSpec(wireSpec("i-2", 1, { environment: {}, controller_url: "http://own:1" }), "http://c:8080");
    assert.equal(plain.controllerUrl, "http://own:1");
    assert.equal("jarFile" in plain || "workloadToken" in plain, false);
    assert.equal("controllerUrl" in toRunnerSpec(wireSpec("i-3", 1), null), false);
  });

  it("refuses layers given only as hashes (the template routes fetch by name)", () => {
    assert.throws(
      () => toRunnerSpec(wireSpec("i-1", 1, { template_hashes: ["a".repeat(64)] }), null),
      (err: unknown) => err instanceof RunnerError && err.code === "INVALID_SPEC",
    );
    assert.throws(() => toRunnerSpec(wireSpec("i-1", 1, { templates: [{ name: "", hash: "" }] }), null), /no name/);
  });
});

describe("command handler", () => {
  it("starts through the runner with the derived controller URL; a repeated start is ok and starts nothing", async () => {
    const runner = new RecordingRunner();
    const handle = handlerWith(runner);
    const start = { type: "start_instance" as const, ...header(), body: { ...header().body, spec: wireSpec("i-1", 30_000) } };
    assert.deepEqual(await handle(start), { ok: true, error_code: "", message: "" });
    const again = await handle(start);
    assert.equal(again.ok, true);
    assert.match(again.message, /already on this node \(PREPARING\)/);
    assert.deepEqual(runner.calls, ["start i-1"]);
    const stale = await handle({ ...start, body: { ...start.body, fencing_token: 2 } });
    assert.equal(stale.error_code, "STALE_EPOCH");
    runner.instances.get("i-1")!.state = "STOPPING";
    assert.equal((await handle(start)).error_code, "INVALID_STATE");
    const otherGroup = await handle({ ...start, body: { ...start.body, group: "game", spec: wireSpec("i-1", 30_000, { group: "game" }) } });
    assert.equal(otherGroup.error_code, "INSTANCE_EXISTS");
  });

  it("refuses a spec whose group differs from the command's, and an unknown platform", async () => {
    const handle = handlerWith(new RecordingRunner());
    const mismatch = await handle({ type: "start_instance", ...header(), body: { ...header().body, spec: wireSpec("i-1", 1, { group: "game" }) } });
    assert.equal(mismatch.error_code, "INVALID_SPEC");
    const unknown = await handle({ type: "prepare_instance", ...header(), body: { ...header().body, spec: wireSpec("i-1", 1, { platform: "bedrock" }) } });
    assert.equal(unknown.error_code, "UNKNOWN_PLATFORM");
  });

  it("prepare validates, applies the fencing rule and starts nothing", async () => {
    const runner = new RecordingRunner();
    const handle = handlerWith(runner);
    const prepare = { type: "prepare_instance" as const, ...header(5), body: { ...header(5).body, spec: wireSpec("i-1", 1) } };
    assert.equal((await handle(prepare)).ok, true);
    assert.equal((await handle({ ...prepare, body: { ...prepare.body, fencing_token: 4 } })).error_code, "STALE_EPOCH");
    assert.deepEqual(runner.calls, []);
  });

  it("answers stop and force-stop once accepted, without waiting for the exit", async () => {
    const runner = new RecordingRunner();
    const handle = handlerWith(runner);
    await handle({ type: "start_instance", ...header(), body: { ...header().body, spec: wireSpec("i-1", 1) } });
    await handle({ type: "start_instance", ...header(), body: { ...header().body, spec: wireSpec("i-2", 1) } });
    assert.equal((await handle({ type: "stop_instance", ...header(), body: { ...header().body, instance_id: "i-1" } })).ok, true);
    assert.equal((await handle({ type: "force_stop_instance", ...header(), body: { ...header().body, instance_id: "i-2" } })).ok, true);
    assert.deepEqual(runner.calls.slice(2), ["stop i-1", "forceStop i-2"]);
    const unknown = await handle({ type: "stop_instance", ...header(), body: { ...header().body, instance_id: "nope" } });
    assert.deepEqual([unknown.ok, unknown.error_code], [false, "UNKNOWN_INSTANCE"]);
  });

  it("passes stdin and mark-ready; a command naming another group is refused", async () => {
    const runner = new RecordingRunner();
    const handle = handlerWith(runner);
    await handle({ type: "start_instance", ...header(), body: { ...header().body, spec: wireSpec("i-1", 1) } });
    assert.equal((await handle({ type: "stdin_instance", ...header(), body: { ...header().body, instance_id: "i-1", line: "say hi" } })).ok, true);
    assert.equal((await handle({ type: "mark_instance_ready", ...header(), body: { ...header().body, instance_id: "i-1" } })).ok, true);
    assert.deepEqual(runner.calls.slice(1), ["stdin i-1 say hi", "ready i-1"]);
    const wrongGroup = await handle({ type: "stdin_instance", ...header(), body: { ...header().body, group: "game", instance_id: "i-1", line: "x" } });
    assert.equal(wrongGroup.error_code, "INVALID_COMMAND");
    const stale = await handle({ type: "mark_instance_ready", ...header(1), body: { ...header(1).body, instance_id: "i-1" } });
    assert.equal(stale.error_code, "STALE_EPOCH");
    assert.match(stale.message, /older than 3/);
  });

  it("lists the live instances, then recent ends with their final state; a restarted id and old ends are left out", async () => {
    const runner = new RecordingRunner();
    const handle = handlerWith(runner);
    const list = async () => {
      const result = await handle({ type: "list_instances", commandId: "c9", body: {} });
      assert.equal(result.ok, true);
      return (result.instances ?? []).map((r) => `${r.instance_id} ${r.state} ${r.exit_code} ${r.fencing_token}${r.message ? ` ${r.message}` : ""}`);
    };
    assert.deepEqual(await list(), []);
    for (const id of ["i-1", "i-2", "i-3"]) await handle({ type: "start_instance", ...header(), body: { ...header().body, spec: wireSpec(id, 1) } });
    runner.instances.get("i-1")!.state = "RUNNING";
    const now = Date.now();
    runner.end("i-2", "STOPPED", 0, now);
    runner.end("i-3", "CRASHED", 3, now);
    assert.deepEqual(await list(), ["i-1 RUNNING 0 3", "i-2 STOPPED 0 3", "i-3 CRASHED 3 3 ERROR_EXIT"]);
    // i-2 starts again under its id (a STATIC slot): its old end is forgotten.
    await handle({ type: "start_instance", ...header(), body: { ...header().body, spec: wireSpec("i-2", 1) } });
    for (const listener of runner.listeners)
      listener({ type: "state", instanceId: "i-2", group: "lobby", state: "PREPARING", previousState: null, timestampMs: now, port: 1 });
    runner.instances.delete("i-2");
    assert.deepEqual(await list(), ["i-1 RUNNING 0 3", "i-3 CRASHED 3 3 ERROR_EXIT"]);
    // Ends older than the retention are dropped; a listing changes nothing and calls no runner action.
    runner.end("i-1", "STOPPED", 0, now - recentEndsRetentionMs - 1);
    assert.deepEqual(await list(), ["i-3 CRASHED 3 3 ERROR_EXIT"]);
    assert.deepEqual(runner.calls, ["start i-1", "start i-2", "start i-3", "start i-2"]);
    assert.ok(recentEndsMax >= 100, "the memory of ends is bounded, and not tiny");
  });

  it("lets an unexpected (non-runner) failure through for the client to answer INTERNAL", async () => {
    const runner = new RecordingRunner();
    runner.writeStdin = () => {
      throw new TypeError("boom");
    };
    runner.start({ instanceId: "i-1", group: "lobby", platform: "simulated", port: 1, memoryMb: 1, static: false, templates: [] }, 3);
    await assert.rejects(handlerWith(runner)({ type: "stdin_instance", ...header(), body: { ...header().body, instance_id: "i-1", line: "x" } }), TypeError);
  });
});

describe("controller endpoint", () => {
  it("takes the host of the dialled gRPC address", () => {
    assert.equal(grpcAddressHost("10.1.2.3:9090"), "10.1.2.3");
    assert.equal(grpcAddressHost("controller-1.example:9090"), "controller-1.example");
    assert.equal(grpcAddressHost("[::1]:9090"), "[::1]");
    assert.equal(grpcAddressHost("dns:///ctl.example:9090"), "ctl.example");
    assert.equal(grpcAddressHost("ipv4:127.0.0.1:9090"), "127.0.0.1");
    assert.equal(grpcAddressHost("localhost"), "localhost");
    assert.equal(grpcAddressHost("fe80::1"), "[fe80::1]");
    assert.equal(controllerHttpBaseUrl("[::1]:9090", 8080), "http://[::1]:8080");
    assert.equal(controllerHttpBaseUrl("10.1.2.3:9090", 0), null, "no HTTP port announced");
  });

  it("is replaced by each hello_ack and by api_credential messages", () => {
    const endpoint = new ControllerEndpoint();
    assert.throws(() => endpoint.requireBaseUrl(), /not known/);
    assert.throws(() => endpoint.requireToken(), /No API credential/);
    const ack = (token: string | null, httpPort: number): HelloAck => ({
      protocol_version: 1,
      protocol_compatible: true,
      session_id: "s",
      heartbeat_interval_ms: 0,
      api_credential: token === null ? null : { token, expires_at_ms: 0 },
      http_port: httpPort,
    });
    endpoint.sessionOpened("10.0.0.1:9090", ack("t1", 8080));
    assert.deepEqual([endpoint.requireBaseUrl(), endpoint.requireToken()], ["http://10.0.0.1:8080", "t1"]);
    endpoint.credentialReceived({ token: "t2", expires_at_ms: 0 });
    assert.equal(endpoint.requireToken(), "t2");
    endpoint.sessionOpened("10.0.0.2:9090", ack(null, 0));
    assert.equal(endpoint.httpBaseUrl, null);
    assert.throws(
      () => endpoint.requireToken(),
      (err: unknown) => (err as { code?: string }).code === "CONTROLLER_ENDPOINT_UNKNOWN",
    );
  });
});

// Why a start failed, on the group record: a real controller and a real `cloud-daemon` whose
// simulated server cannot bind its port (another process holds it). The daemon's reason reaches
// the group's `schedulingIssue` (GET /api/v1/groups/{name}) and `cloudctl group info` while the
// starts keep failing, outlives the evaluations that place the replacements, and is cleared once
// an instance of the group reaches RUNNING (the port was freed).
import assert from "node:assert/strict";
import { createServer, type Server } from "node:net";
import { after, before, describe, test } from "node:test";
import {
  api,
  cleanupDirs,
  createToken,
  eventsOf,
  spawnDaemon,
  startGatewayController,
  type DaemonProcess,
  type GatewayController,
} from "../gateway/harness.js";
import { homeWithContext, runCli } from "../cli/harness.js";
import { eventually } from "../support/wait.js";

/** Bound on waiting for the scheduler and the daemon (a loaded 2-core machine). */
const waitMs = 90_000;
/** This file's only port. */
const port = 24_390;

interface Issue {
  code: string;
  message: string;
  since: string;
}

describe("a failed start's reason is the group's scheduling issue until an instance runs", { timeout: 300_000 }, () => {
  let c: GatewayController;
  let daemon: DaemonProcess;
  let home: string;
  let disposeHome = () => {};

  before(async () => {
    // No crash-loop pause here: the start failure's own issue is what is looked at.
    c = await startGatewayController({ scheduler: { evaluationIntervalMs: 500 }, config: { crashes: { crashLoopThreshold: 1_000 } } });
    ({ home, dispose: disposeHome } = homeWithContext(c.url, c.adminToken));
    const { token } = await createToken(c);
    daemon = spawnDaemon([c.grpcAddress], token, { maxMemoryMb: 1024 });
    await eventually(() => eventsOf(c, "NODE_CONNECTED").length >= 1, "the daemon connected", waitMs);
  });

  after(async () => {
    await daemon?.stop();
    await c?.stop();
    cleanupDirs();
    disposeHome();
  });

  test("bind failure: START_FAILED with the daemon's reason on the record and in group info, cleared by RUNNING", async () => {
    const taken: Server = createServer();
    await new Promise<void>((resolve) => taken.listen(port, "0.0.0.0", resolve));
    let released = false;
    const release = () => (released ? Promise.resolve() : ((released = true), new Promise<void>((resolve) => taken.close(() => resolve()))));
    try {
      const created = await api(c, "POST", "/api/v1/groups", {
        name: "bound",
        platform: "simulated",
        scalingMode: "STATIC",
        minInstances: 1,
        maxInstances: 1,
        memoryMb: 64,
        portRange: { start: port, end: port },
      });
      assert.equal(created.status, 201, JSON.stringify(created.json));
      assert.equal(created.json.schedulingIssue, null);

      const issueOf = async (): Promise<Issue | null> =>
        ((await api(c, "GET", "/api/v1/groups/bound")).json as { schedulingIssue: Issue | null }).schedulingIssue;
      const first = await eventually(
        async () => {
          const issue = await issueOf();
          return issue?.code === "START_FAILED" ? issue : null;
        },
        () => `a START_FAILED issue on bound\n${daemon.output().slice(-2_000)}`,
        waitMs,
      );
      assert.match(
        first.message,
        new RegExp(`^the last start failed: bound-\\S+ on \\S+: ERROR_EXIT: exit 2: .*Failed to bind to 0\\.0\\.0\\.0:${port}.*EADDRINUSE`),
      );

      // Replacements are placed and fail again: the issue stays (placing them clears nothing), its
      // `since` is the first failure's, and the crash list has the same reason.
      const crashesBefore = eventsOf(c, "INSTANCE_CRASHED").length;
      await eventually(() => eventsOf(c, "INSTANCE_CRASHED").length >= crashesBefore + 2, "two more failed starts", waitMs);
      const later = await issueOf();
      assert.equal(later?.code, "START_FAILED", `still the issue after more placements: ${JSON.stringify(later)}`);
      assert.equal(later?.since, first.since, "since: when the starts began failing");
      const info = await runCli(["group", "info", "bound"], { home });
      assert.equal(info.code, 0, info.stderr);
      assert.match(info.stdout, /Issue\s+START_FAILED: the last start failed: bound-\S+ on \S+: ERROR_EXIT: exit 2: .*Failed to bind/);

      await release();
      let seen: Issue | null = later;
      await eventually(
        async () => {
          const running = ((await api(c, "GET", "/api/v1/services?group=bound")).json as { state: string }[]).some((i) => i.state === "RUNNING");
          seen = await issueOf();
          return running && seen === null;
        },
        () => `an instance RUNNING and the issue cleared: ${JSON.stringify(seen)}\n${daemon.output().slice(-2_000)}`,
        waitMs,
      );
      const cleared = await runCli(["group", "info", "bound"], { home });
      assert.equal(cleared.code, 0, cleared.stderr);
      assert.doesNotMatch(cleared.stdout, /START_FAILED/);
    } finally {
      await release();
    }
  });
});

// `cloudctl maintenance` against a real controller (the HTTP test app): status, on with a message
// and allowed players, allow, off; a VIEWER is refused the change (exit 3).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { startTestApp, type TestApp } from "../support/http-app.js";
import { homeWithContext, runCli } from "./harness.js";

describe("cloudctl maintenance", () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  test("on, allow, status and off change the switch; a VIEWER cannot", async () => {
    const { home, dispose } = homeWithContext(t.baseUrl, await t.tokenFor("OPERATOR"));
    const viewer = homeWithContext(t.baseUrl, await t.tokenFor("VIEWER"));
    try {
      const on = await runCli(["maintenance", "on", "--message", "Back at 22:00", "--allow", "alice", "--allow", "Bob"], { home });
      assert.equal(on.code, 0, on.stderr);
      assert.match(on.stdout, /Back at 22:00/);
      assert.deepEqual((await t.capabilities.maintenance.get()).allowedPlayers, ["alice", "bob"]);
      const allow = await runCli(["maintenance", "allow", "carol", "--json"], { home });
      assert.equal(allow.code, 0, allow.stderr);
      assert.deepEqual(JSON.parse(allow.stdout).allowedPlayers, ["carol"]);
      const status = await runCli(["maintenance", "status", "--json"], { home: viewer.home });
      assert.equal(status.code, 0, status.stderr);
      assert.equal(JSON.parse(status.stdout).enabled, true);
      const refused = await runCli(["maintenance", "off"], { home: viewer.home });
      assert.equal(refused.code, 3, refused.stderr);
      const off = await runCli(["maintenance", "off"], { home });
      assert.equal(off.code, 0, off.stderr);
      assert.equal((await t.capabilities.maintenance.get()).enabled, false);
    } finally {
      dispose();
      viewer.dispose();
    }
  });
});

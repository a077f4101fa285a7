// cloudctl cluster config against a real controller (in this process, single-member Raft): show
// lists every key with its source, set makes a version the controller then applies (and an
// unchanged set makes none), a bad key or value is the controller's 422 and changes nothing,
// --unset gives a key back to controller.yml, versions lists the history with parents, rollback
// re-activates an earlier version.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { startInProcessController, type InProcessTestController } from "../support/controller.js";
import { homeWithContext, runCli, type CliResult } from "./harness.js";

function ok(result: CliResult): CliResult {
  assert.equal(result.code, 0, `exit ${result.code}\nstdout: ${result.stdout}\nstderr: ${result.stderr}`);
  return result;
}

describe("cloudctl cluster config", { timeout: 240_000 }, () => {
  let controller: InProcessTestController;
  let home: string;
  let disposeHome = () => {};
  const cli = (args: string[]) => runCli(args, { home });
  const config = async () => {
    const res = await fetch(`${controller.url}/api/v1/cluster/config`, { headers: { authorization: `Bearer ${controller.adminToken}` } });
    return (await res.json()) as { activeVersion: number | null; config: Record<string, unknown> };
  };

  before(async () => {
    controller = await startInProcessController();
    ({ home, dispose: disposeHome } = homeWithContext(controller.url, controller.adminToken));
  });
  after(async () => {
    await controller?.stop();
    disposeHome();
  });

  test("show, set, unset, versions and rollback", async () => {
    const shown = ok(await cli(["cluster", "config", "show"])).stdout;
    assert.match(shown, /Active version\s+none/);
    assert.match(shown, /crashes\.crashLoopThreshold\s+3\s+controller\.yml/);

    const bad = await cli(["cluster", "config", "set", "no.such.key=1"]);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /VALIDATION_ERROR|no\.such\.key/);
    const notAValue = await cli(["cluster", "config", "set", "share.enabled=yes"]);
    assert.notEqual(notAValue.code, 0);
    assert.equal((await config()).activeVersion, null, "refusals changed nothing");

    assert.match(
      ok(await cli(["cluster", "config", "set", "crashes.crashLoopThreshold=5", "share.enabled=true", "--comment", "weekend"])).stdout,
      /config version 1 is active/,
    );
    assert.deepEqual((await config()).config, { "crashes.crashLoopThreshold": 5, "share.enabled": true });
    assert.match(ok(await cli(["cluster", "config", "set", "share.enabled=true"])).stderr, /nothing changed: version 1 stays active/);
    assert.match(ok(await cli(["cluster", "config", "set", "--unset", "share.enabled"])).stdout, /config version 2 is active/);
    assert.deepEqual((await config()).config, { "crashes.crashLoopThreshold": 5 });
    assert.match(ok(await cli(["cluster", "config", "show"])).stdout, /share\.enabled\s+false\s+controller\.yml/);

    const versions = ok(await cli(["cluster", "config", "versions"])).stdout;
    assert.match(versions, /VERSION\s+ACTIVE\s+PARENT\s+CREATED\s+BY\s+COMMENT/);
    assert.match(versions, /\n1\s+-\s+\S+\s+admin\s+weekend/);
    assert.match(versions, /\n2\s+yes\s+1\s+/);

    assert.match(ok(await cli(["cluster", "config", "rollback", "1"])).stdout, /config version 1 is active again/);
    assert.equal((await config()).activeVersion, 1);
    const again = await cli(["cluster", "config", "rollback", "1"]);
    assert.notEqual(again.code, 0);
    assert.match(again.stderr, /already active/);
  });
});

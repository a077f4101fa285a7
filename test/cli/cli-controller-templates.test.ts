// cloudctl template commands against a real controller: list, versions, rollback to the previous and to a chosen version.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { startTestController, type TestController } from "../support/controller.js";
import { homeWithContext, runCli } from "./harness.js";

describe("cloudctl templates against a real controller", () => {
  let controller: TestController;
  let home: { home: string; dispose: () => void };
  const api = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(`${controller.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${controller.adminToken}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    assert.ok(response.ok, `${method} ${path}: ${response.status} ${text}`);
    return text === "" ? null : JSON.parse(text);
  };
  before(async () => {
    controller = await startTestController();
    home = homeWithContext(controller.url, controller.adminToken);
  });
  after(async () => {
    await controller?.stop();
    home?.dispose();
  });

  test("list shows NAME HASH SIZE DESCRIPTION; rollback without --hash restores the previous version, with --hash that one", async () => {
    await api("POST", "/api/v1/templates", { name: "lobby", description: "Lobby world", platform: "paper" });
    await api("PUT", "/api/v1/templates/lobby/files/content", { path: "server.properties", content: "motd=one\n" });
    await api("PUT", "/api/v1/templates/lobby/files/content", { path: "server.properties", content: "motd=two, longer\n" });
    const versions: { hash: string }[] = await api("GET", "/api/v1/templates/lobby/versions");
    assert.ok(versions.length >= 2, JSON.stringify(versions));
    const [newest, previous] = versions;
    const oldest = versions[versions.length - 1];

    const [list, listed] = await Promise.all([
      runCli(["template", "list"], { home: home.home }),
      runCli(["template", "versions", "lobby", "--json"], { home: home.home }),
    ]);
    assert.equal(list.code, 0, list.stderr);
    assert.match(list.stdout, /NAME\s+HASH\s+SIZE\s+DESCRIPTION/);
    assert.match(list.stdout, new RegExp(`lobby\\s+${newest.hash.slice(0, 8)}\\s+\\d+ B\\s+Lobby world`));
    assert.deepEqual(JSON.parse(listed.stdout), versions);

    const back = await runCli(["template", "rollback", "lobby", "--json"], { home: home.home });
    assert.equal(back.code, 0, back.stderr);
    assert.deepEqual(JSON.parse(back.stdout), { status: "restored", hash: previous.hash });
    assert.equal((await api("GET", "/api/v1/templates/lobby")).hash, previous.hash);

    const chosen = await runCli(["template", "rollback", "lobby", "--hash", oldest.hash], { home: home.home });
    assert.equal(chosen.code, 0, chosen.stderr);
    assert.match(chosen.stdout, new RegExp(`restored ${oldest.hash}`));
    assert.equal((await api("GET", "/api/v1/templates/lobby")).hash, oldest.hash);

    const [unknownHash, unknownTemplate] = await Promise.all([
      runCli(["template", "rollback", "lobby", "--hash", "0".repeat(64)], { home: home.home }),
      runCli(["template", "versions", "nope"], { home: home.home }),
    ]);
    assert.equal(unknownHash.code, 4, unknownHash.stderr);
    assert.equal(unknownTemplate.code, 4, unknownTemplate.stderr);
  });
});

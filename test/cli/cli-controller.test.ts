// cloudctl against a real controller (child process): setup, login, logout, status, version, group create/list/info, unknown group.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { parse } from "yaml";
import { startTestController, type TestController } from "../support/controller.js";
import { runCli, tempHome } from "./harness.js";

describe("cloudctl against a real controller", () => {
  let controller: TestController;
  const { home, dispose } = tempHome();
  before(async () => {
    controller = await startTestController({}, { login: false });
  });
  after(async () => {
    await controller?.stop();
    dispose();
  });

  test("login, group create, group list --json, group info, exit 4 for an unknown group", async () => {
    const added = await runCli(["context", "add", "real", "--controller", controller.url], { home });
    assert.equal(added.code, 0, added.stderr);
    const badLogin = await runCli(["login", "--username", controller.adminUsername, "--password", "wrong"], { home });
    assert.equal(badLogin.code, 2, badLogin.stderr);
    const login = await runCli(["login", "--username", controller.adminUsername], { home, stdin: `${controller.adminPassword}\n` });
    assert.equal(login.code, 0, login.stderr);
    const config = parse(readFileSync(join(home, ".cloudctl", "config.yml"), "utf8"));
    assert.equal(config.contexts.real.controller, controller.url);
    assert.equal(typeof config.contexts.real.token, "string");
    assert.deepEqual(Object.keys(config.contexts.real).sort(), ["controller", "token"], "only the token is stored");

    const create = await runCli(["group", "create", "--name", "lobby", "--platform", "simulated", "--min", "0", "--max", "2", "--template", "base"], { home });
    assert.equal(create.code, 0, create.stderr);

    const [list, info, human, unknown] = await Promise.all([
      runCli(["group", "list", "--json"], { home }),
      runCli(["group", "info", "lobby", "--json"], { home }),
      runCli(["group", "info", "lobby"], { home }),
      runCli(["group", "info", "no-such-group"], { home }),
    ]);
    assert.equal(list.code, 0, list.stderr);
    const groups = JSON.parse(list.stdout);
    const items = Array.isArray(groups) ? groups : groups.data;
    const lobby = items.find((g: { name: string }) => g.name === "lobby");
    assert.ok(lobby, list.stdout);
    assert.equal(lobby.platform, "simulated");
    assert.equal(lobby.maxInstances, 2);

    const direct = await fetch(`${controller.url}/api/v1/groups`, { headers: { authorization: `Bearer ${config.contexts.real.token}` } });
    assert.equal(list.stdout, `${await direct.text()}\n`, "--json prints the body as the controller sent it");

    assert.equal(info.code, 0, info.stderr);
    const record = JSON.parse(info.stdout);
    assert.equal(record.jarFile, "server.jar");
    assert.deepEqual(record.templates, ["base"]);
    assert.equal(record.memoryMb, 1024);
    assert.equal(record.routing, "LOWEST_PLAYERS");
    assert.deepEqual(record.portRange, { start: 30000, end: 30100 });
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, /Status\s+UP/);

    assert.equal(unknown.code, 4, unknown.stderr);
    assert.match(unknown.stderr, /NOT_FOUND/);
  });

  test("setup from piped answers, then logout keeps the URL and commands need a new login", async () => {
    const fresh = tempHome();
    try {
      const setup = await runCli(["setup", "--controller", controller.url, "--context", "lab", "-u", controller.adminUsername], {
        home: fresh.home,
        stdin: `${controller.adminPassword}\n`,
      });
      assert.equal(setup.code, 0, setup.stderr);
      const [status, version] = await Promise.all([runCli(["status", "--json"], { home: fresh.home }), runCli(["version", "--json"], { home: fresh.home })]);
      assert.equal(status.code, 0, status.stderr);
      assert.equal(typeof JSON.parse(status.stdout).groupCount, "number");
      assert.equal(typeof JSON.parse(version.stdout).controller_version, "string");
      assert.equal((await runCli(["logout"], { home: fresh.home })).code, 0);
      const config = parse(readFileSync(join(fresh.home, ".cloudctl", "config.yml"), "utf8"));
      assert.deepEqual(config.contexts.lab, { controller: controller.url });
      assert.equal(config.currentContext, "lab");
      const afterLogout = await runCli(["group", "list"], { home: fresh.home });
      assert.equal(afterLogout.code, 2);
    } finally {
      fresh.dispose();
    }
  });
});

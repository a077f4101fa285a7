// Contexts, file modes and the migration of the legacy flat configuration file.
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { parse } from "yaml";
import { runCli, startFakeController, tempHome, type FakeController } from "./harness.js";

describe("cloudctl contexts and configuration", () => {
  let server: FakeController;
  before(async () => {
    // Every route answers with the path prefix it was reached under, so the test sees which
    // controller URL the CLI resolved.
    server = await startFakeController((app) => {
      app.get("*", (c) => c.json([{ name: new URL(c.req.url).pathname, runningInstances: 1, minInstances: 1 }]));
    });
  });
  after(() => server.close());

  test("context add creates the directory 0700 and the file 0600; list, use, current, remove", async () => {
    const { home, dispose } = tempHome();
    try {
      const add = await runCli(["context", "add", "prod", "--controller", "http://prod.example:8080", "--token", "t-prod"], { home });
      assert.equal(add.code, 0, add.stderr);
      const dir = join(home, ".cloudctl");
      assert.equal(statSync(dir).mode & 0o777, 0o700);
      assert.equal(statSync(join(dir, "config.yml")).mode & 0o777, 0o600);
      const [second, noController] = await Promise.all([
        runCli(["context", "add", "dev", "--controller", "http://dev.example:8080"], { home: home }),
        runCli(["context", "add", "broken"], { home }),
      ]);
      assert.equal(second.code, 0, second.stderr);
      assert.equal(noController.code, 1);

      const config = parse(readFileSync(join(dir, "config.yml"), "utf8"));
      assert.equal(config.currentContext, "prod", "the first context becomes current");
      assert.deepEqual(config.contexts.prod, { controller: "http://prod.example:8080", token: "t-prod" });
      assert.deepEqual(config.contexts.dev, { controller: "http://dev.example:8080" });
      assert.equal(config.accent, "purple");

      const list = await runCli(["context", "ls", "--json"], { home });
      assert.equal(list.code, 0, list.stderr);
      const listed = JSON.parse(list.stdout);
      assert.equal(listed.currentContext, "prod");
      assert.deepEqual(listed.contexts.map((c: { name: string }) => c.name).sort(), ["dev", "prod"]);
      assert.ok(!list.stdout.includes("t-prod"), "tokens are never listed");

      assert.equal((await runCli(["context", "use", "dev"], { home })).code, 0);
      assert.equal((await runCli(["context", "current"], { home })).stdout.trim(), "dev");

      const [removeActive, removeOther] = await Promise.all([runCli(["context", "remove", "dev"], { home }), runCli(["context", "rm", "missing"], { home })]);
      assert.equal(removeActive.code, 1, "the active context needs --force");
      assert.match(removeActive.stderr, /--force/);
      assert.equal(removeOther.code, 1);
      assert.equal((await runCli(["context", "delete", "dev", "--force"], { home })).code, 0);
      const after = parse(readFileSync(join(dir, "config.yml"), "utf8"));
      assert.deepEqual(Object.keys(after.contexts), ["prod"]);
      assert.equal(after.currentContext, undefined);
      assert.equal(statSync(join(dir, "config.yml")).mode & 0o777, 0o600, "rewrites keep mode 0600");
    } finally {
      dispose();
    }
  });

  test("a legacy flat file migrates to a context named default", async () => {
    const { home, dispose } = tempHome();
    try {
      const dir = join(home, ".cloudctl");
      mkdirSync(dir, { mode: 0o755 });
      writeFileSync(join(dir, "config.yml"), `controller: ${server.url}/legacy\ntoken: legacy-token\n`, { mode: 0o644 });
      const result = await runCli(["group", "list", "--json"], { home });
      assert.equal(result.code, 0, result.stderr);
      assert.equal(JSON.parse(result.stdout)[0].name, "/legacy/api/v1/groups");
      assert.equal(server.requests.at(-1)?.authorization, "Bearer legacy-token");
      const config = parse(readFileSync(join(dir, "config.yml"), "utf8"));
      assert.deepEqual(config.contexts, { default: { controller: `${server.url}/legacy`, token: "legacy-token" } });
      assert.equal(config.currentContext, "default");
      assert.equal(config.controller, undefined);
      assert.equal(statSync(dir).mode & 0o777, 0o700);
      assert.equal(statSync(join(dir, "config.yml")).mode & 0o777, 0o600);
    } finally {
      dispose();
    }
  });
});

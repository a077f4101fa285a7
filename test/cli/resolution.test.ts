// Resolution order of controller, token and context; the authentication gate.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { runCli, startFakeController, tempHome, writeConfig, type FakeController } from "./harness.js";

describe("cloudctl resolution and gate", () => {
  let server: FakeController;
  before(async () => {
    // Every route answers with the path prefix it was reached under, so the test sees which
    // controller URL the CLI resolved.
    server = await startFakeController((app) => {
      app.get("*", (c) => c.json([{ name: new URL(c.req.url).pathname, runningInstances: 1, minInstances: 1 }]));
    });
  });
  after(() => server.close());

  test("resolution order: flag, then environment, then context, each independently", async () => {
    const { home, dispose } = tempHome();
    try {
      writeConfig(home, {
        currentContext: "one",
        contexts: { one: { controller: `${server.url}/ctx-one`, token: "tok-one" }, two: { controller: `${server.url}/ctx-two`, token: "tok-two" } },
      });
      const env = { CLOUD_CONTROLLER: `${server.url}/env`, CLOUD_TOKEN: "tok-env" };
      const cases: { args: string[]; env?: Record<string, string>; path: string; token: string }[] = [
        { args: [], path: "/ctx-one", token: "tok-one" },
        { args: ["--context", "two"], path: "/ctx-two", token: "tok-two" },
        { args: [], env: { CLOUD_CONTEXT: "two" }, path: "/ctx-two", token: "tok-two" },
        { args: ["--context", "one"], env: { CLOUD_CONTEXT: "two" }, path: "/ctx-one", token: "tok-one" },
        { args: [], env, path: "/env", token: "tok-env" },
        { args: [], env: { CLOUD_TOKEN: "tok-env" }, path: "/ctx-one", token: "tok-env" },
        { args: ["--controller", `${server.url}/flag`], env, path: "/flag", token: "tok-env" },
        { args: ["-c", `${server.url}/flag`, "-t", "tok-flag"], env, path: "/flag", token: "tok-flag" },
        { args: ["--token", "tok-flag"], env: { CLOUD_CONTEXT: "two" }, path: "/ctx-two", token: "tok-flag" },
      ];
      const results = await Promise.all(cases.map((c) => runCli(["group", "list", "--json", ...c.args], { home, env: c.env })));
      results.forEach((result, index) => {
        const expected = cases[index];
        assert.equal(result.code, 0, `case ${index}: ${result.stderr}`);
        assert.equal(JSON.parse(result.stdout)[0].name, `${expected.path}/api/v1/groups`, `case ${index}: controller`);
        const seen = server.requests.find((r) => r.path === `${expected.path}/api/v1/groups` && r.authorization === `Bearer ${expected.token}`);
        assert.ok(seen, `case ${index}: token ${expected.token} sent to ${expected.path}`);
      });
      const missing = await runCli(["group", "list", "--context", "ghost"], { home });
      assert.equal(missing.code, 1);
      assert.match(missing.stderr, /context "ghost" does not exist/);
    } finally {
      dispose();
    }
  });

  test("the gate blocks commands before any context exists; allowed commands still run", async () => {
    const { home, dispose } = tempHome();
    try {
      const [blocked, version, completion, contextList, recover, noToken] = await Promise.all([
        runCli(["group", "list"], { home }),
        runCli(["version", "--json"], { home }),
        runCli(["completion", "bash"], { home }),
        runCli(["context", "list"], { home }),
        runCli(["cluster", "recover", "--i-have-only-survivor"], { home }),
        runCli(["group", "list", "--controller", server.url], { home }),
      ]);
      assert.equal(blocked.code, 1);
      assert.match(blocked.stderr, /cloudctl setup/);
      assert.equal(version.code, 0, version.stderr);
      assert.deepEqual(Object.keys(JSON.parse(version.stdout)).slice(0, 4), ["cli", "go", "node", "os"]);
      assert.equal(completion.code, 0, completion.stderr);
      assert.equal(contextList.code, 0, contextList.stderr);
      assert.equal(recover.code, 0, recover.stderr);
      assert.match(recover.stdout, /Single-survivor reset/);
      assert.equal(noToken.code, 2, "an explicit controller passes the gate, but a token is still needed");
      assert.match(noToken.stderr, /not signed in/);
    } finally {
      dispose();
    }
  });
});

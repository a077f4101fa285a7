// Resolution order of controller, token and context.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { runCli, startFakeController, tempHome, writeConfig, type FakeController } from "./harness.js";

describe("cloudctl resolution order", () => {
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
        { args: ["--context", "one"], env: { CLOUD_CONTEXT: "two" }, path: "/ctx-one", token: "tok-one" },
        { args: [], env: { CLOUD_CONTEXT: "two" }, path: "/ctx-two", token: "tok-two" },
        { args: [], env, path: "/env", token: "tok-env" },
        { args: [], env: { CLOUD_TOKEN: "tok-env" }, path: "/ctx-one", token: "tok-env" },
        { args: ["--controller", `${server.url}/flag`], env, path: "/flag", token: "tok-env" },
        { args: ["-t", "tok-flag"], env: { ...env, CLOUD_CONTEXT: "two", CLOUD_CONTROLLER: "" }, path: "/ctx-two", token: "tok-flag" },
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
});

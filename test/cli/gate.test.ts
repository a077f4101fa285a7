// The authentication gate: what runs before any context exists.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { runCli, startFakeController, tempHome, type FakeController } from "./harness.js";

describe("cloudctl authentication gate", () => {
  let server: FakeController;
  before(async () => {
    server = await startFakeController((app) => {
      app.get("*", (c) => c.json([]));
    });
  });
  after(() => server.close());

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

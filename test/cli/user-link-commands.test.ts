// `cloudctl user link|unlink|minecraft` against a real controller (the HTTP test app): an OPERATOR
// links and unlinks its own account, lists it; it cannot link another user's (exit 3); an ADMIN
// links for another user with --user; a malformed UUID is refused and changes nothing.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { startTestApp, type TestApp } from "../support/http-app.js";
import { homeWithContext, runCli } from "./harness.js";

const ACCOUNT = "0f2c4b1e-6a7d-4e3f-8b9a-1c2d3e4f5a6b";

describe("cloudctl user link", () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  test("link, minecraft and unlink for oneself and, as an ADMIN, for another user", async () => {
    const operator = homeWithContext(t.baseUrl, await t.tokenFor("OPERATOR"));
    const admin = homeWithContext(t.baseUrl, await t.tokenFor("ADMIN"));
    await t.tokenFor("VIEWER");
    try {
      const linked = await runCli(["user", "link", ACCOUNT.toUpperCase()], { home: operator.home });
      assert.equal(linked.code, 0, linked.stderr);
      assert.match(linked.stdout, new RegExp(`${ACCOUNT} is linked to operator-user`));
      const listed = await runCli(["user", "minecraft", "--json"], { home: operator.home });
      assert.equal(listed.code, 0, listed.stderr);
      assert.deepEqual(
        JSON.parse(listed.stdout).map((l: { uuid: string }) => l.uuid),
        [ACCOUNT],
      );
      const bad = await runCli(["user", "link", "not-a-uuid"], { home: operator.home });
      assert.notEqual(bad.code, 0);
      assert.match(bad.stderr, /uuid/);
      const forOther = await runCli(["user", "link", "--user", "viewer-user", "11111111-2222-4333-8444-555555555555"], { home: operator.home });
      assert.equal(forOther.code, 3, forOther.stderr);
      assert.deepEqual(await t.auth.links.list("viewer-user"), []);

      const byAdmin = await runCli(["user", "link", "--user", "viewer-user", "11111111-2222-4333-8444-555555555555"], { home: admin.home });
      assert.equal(byAdmin.code, 0, byAdmin.stderr);
      assert.equal((await t.auth.links.list("viewer-user"))[0]?.linkedBy, "admin");

      const unlinked = await runCli(["user", "unlink", ACCOUNT], { home: operator.home });
      assert.equal(unlinked.code, 0, unlinked.stderr);
      assert.deepEqual(await t.auth.links.list("operator-user"), []);
      const again = await runCli(["user", "unlink", ACCOUNT], { home: operator.home });
      assert.equal(again.code, 4, "not linked any more: not found");
    } finally {
      operator.dispose();
      admin.dispose();
    }
  });
});

// cloudctl share list|show|revoke against the real HTTP app, sharing to a real PrivateBin-speaking
// server: a share prints its id, the list shows it (never a delete token), revoke deletes the
// paste; exit 1 for a second revoke (409), 4 for an unknown id, 3 without share.invoke.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { startTestApp, type TestApp } from "../support/http-app.js";
import { startPrivateBinServer, type PrivateBinServer } from "../support/privatebin-server.js";
import { homeWithContext, runCli } from "./harness.js";

describe("cloudctl share", () => {
  let t: TestApp;
  let paste: PrivateBinServer;
  let home: string;
  let operatorHome: string;
  const disposers: (() => void)[] = [];

  before(async () => {
    paste = await startPrivateBinServer();
    t = await startTestApp({ config: { share: { enabled: true, serviceUrl: paste.url } } });
    const admin = homeWithContext(t.baseUrl, await t.tokenFor("ADMIN"));
    const operator = homeWithContext(t.baseUrl, await t.tokenFor("OPERATOR"));
    home = admin.home;
    operatorHome = operator.home;
    disposers.push(admin.dispose, operator.dispose);
  });
  after(async () => {
    for (const dispose of disposers) dispose();
    await t?.close();
    await paste?.close();
  });

  test("a share prints its id; share list and show name it without the delete token; share revoke deletes the paste", async () => {
    const shared = await runCli(["logs", "--share"], { home });
    assert.equal(shared.code, 0, shared.stderr);
    const [url, passwordLine, idLine] = shared.stdout.trim().split("\n");
    assert.match(passwordLine!, /^password: /);
    const id = idLine!.replace(/^share: /, "");
    assert.match(id, /^[0-9a-f]{24}$/);
    assert.match(shared.stderr, new RegExp(`cloudctl share revoke ${id}`));
    const pasteId = new URL(url!).search.slice(1);
    const deleteToken = paste.pastes.get(pasteId)!.deleteToken;

    const [list, json, show] = await Promise.all([
      runCli(["share", "list"], { home }),
      runCli(["--json", "share", "ls", "--limit", "1"], { home }),
      runCli(["share", "show", id], { home }),
    ]);
    assert.equal(list.code, 0, list.stderr);
    assert.match(list.stdout, new RegExp(`${id}.*logs.*admin.*active`));
    const records = JSON.parse(json.stdout) as { id: string; revocable: boolean }[];
    assert.deepEqual(
      records.map((r) => [r.id, r.revocable]),
      [[id, true]],
    );
    assert.equal(show.code, 0, show.stderr);
    assert.match(show.stdout, /state\s+active/);
    assert.ok(show.stdout.includes(url!));
    for (const output of [list.stdout, json.stdout, show.stdout]) assert.ok(!output.includes(deleteToken), "no delete token is printed");

    const revoked = await runCli(["share", "revoke", id], { home });
    assert.equal(revoked.code, 0, revoked.stderr);
    assert.match(revoked.stdout, new RegExp(`revoked share ${id}`));
    assert.equal((await paste.read(pasteId)).status, 1, "the paste is gone");
    const after = await runCli(["share", "show", id], { home });
    assert.match(after.stdout, /state\s+revoked/);
    assert.match(after.stdout, /revoked\s+\S+ by admin/);

    const again = await runCli(["share", "revoke", id], { home });
    assert.equal(again.code, 1, "409 is a generic failure");
    assert.match(again.stderr, /SHARE_ALREADY_REVOKED, HTTP 409/);
  });

  test("share revoke of an unknown id exits 4; without share.invoke exits 3; a bad --limit exits 1 before any request", async () => {
    const unknown = await runCli(["share", "revoke", "000000000000000000000000"], { home });
    assert.equal(unknown.code, 4, unknown.stderr);
    assert.match(unknown.stderr, /NOT_FOUND/);
    const [list, revoke] = await Promise.all([runCli(["share", "list"], { home: operatorHome }), runCli(["share", "revoke", "x"], { home: operatorHome })]);
    assert.equal(list.code, 3, list.stderr);
    assert.equal(revoke.code, 3, revoke.stderr);
    const bad = await runCli(["share", "list", "--limit", "0"], { home });
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /--limit/);
  });
});

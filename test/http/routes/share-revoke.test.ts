/**
 * Recorded shares and their revocation on a real server, against a real HTTP server speaking the
 * PrivateBin API (test/support/privatebin-server.ts): every share is recorded with the id it
 * answers, listed newest first without its delete token, revoked by the paste service's delete
 * (the paste is gone from the service), audited as share.create and share.revoke, and counted in
 * cloud_share_revocations_total{outcome}: success, error (502, the record stays revocable),
 * missing-token (409 SHARE_NOT_REVOCABLE). 409 SHARE_ALREADY_REVOKED, 404 NOT_FOUND, 403 without
 * share.invoke.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { SHARES_COLLECTION } from "../../../src/share/share-records.js";
import type { Doc } from "../../../src/store/ports.js";
import { startTestApp, type TestApp } from "../../support/http-app.js";
import { startPrivateBinServer, type PrivateBinServer } from "../../support/privatebin-server.js";

const revocations = async (t: TestApp, outcome: string): Promise<number> => {
  const line = (await t.metrics.render()).split("\n").find((l) => l.startsWith(`cloud_share_revocations_total{outcome="${outcome}"} `));
  return line === undefined ? 0 : Number(line.split(" ").at(-1));
};

describe("recorded shares and revocation", () => {
  let paste: PrivateBinServer;
  let t: TestApp;
  let admin: string;

  before(async () => {
    paste = await startPrivateBinServer();
    t = await startTestApp({ config: { share: { enabled: true, defaultPrivate: true, serviceUrl: paste.url } } });
    admin = await t.tokenFor("ADMIN");
  });
  after(async () => {
    await t.close();
    await paste.close();
  });

  const shareLogs = async (body: Record<string, unknown> = {}) => {
    const res = await t.request("POST", "/api/v1/system/logs/share", { token: admin, body });
    assert.equal(res.status, 200, res.text);
    return res.json as { id: string; url: string; deleteUrl: string; password?: string };
  };

  it("records a share, lists it newest first without its delete token, revokes it: the paste is gone and success is counted", async () => {
    const first = await shareLogs({ expiry: "1h" });
    const shared = await shareLogs({ public: true, burnAfterRead: true });
    assert.match(shared.id, /^[0-9a-f]{24}$/);
    const pasteId = new URL(shared.url).search.slice(1);
    assert.equal((await paste.read(pasteId)).status, 0, "the paste is there");
    const stored = [...paste.pastes.values()].find((p) => p.id === pasteId)!;

    const list = await t.request("GET", "/api/v1/shares", { token: admin });
    assert.equal(list.status, 200, list.text);
    assert.deepEqual(
      list.json.slice(0, 2).map((r: { id: string }) => r.id),
      [shared.id, first.id],
      "newest first",
    );
    const listed = list.json[0];
    assert.equal(listed.kind, "logs");
    assert.equal(listed.pasteId, pasteId);
    assert.equal(listed.url, shared.url);
    assert.equal(listed.public, true);
    assert.equal(listed.burnAfterRead, true);
    assert.equal(listed.expiry, "1d");
    assert.equal(listed.createdBy, "admin");
    assert.equal(listed.revokedAt, null);
    assert.equal(listed.revocable, true);
    assert.ok(!list.text.includes(stored.deleteToken), "the list never carries a delete token");
    assert.ok(!list.text.toLowerCase().includes("deletetoken") && !list.text.includes("deleteUrl"));
    const limited = await t.request("GET", "/api/v1/shares?limit=1", { token: admin });
    assert.deepEqual(
      limited.json.map((r: { id: string }) => r.id),
      [shared.id],
    );
    const show = await t.request("GET", `/api/v1/shares/${shared.id}`, { token: admin });
    assert.equal(show.status, 200, show.text);
    assert.deepEqual(show.json, listed);
    assert.ok(!show.text.includes(stored.deleteToken));

    const successBefore = await revocations(t, "success");
    const revoked = await t.request("DELETE", `/api/v1/shares/${shared.id}`, { token: admin });
    assert.equal(revoked.status, 200, revoked.text);
    const deleteCall = paste.requests.at(-1)!;
    assert.equal(deleteCall.method, "POST", "deleted by the JSON API");
    assert.equal(deleteCall.requestedWith, "JSONHttpRequest");
    assert.equal(revoked.json.id, shared.id);
    assert.equal(revoked.json.revokedBy, "admin");
    assert.ok(Date.parse(revoked.json.revokedAt) <= Date.now());
    assert.equal(revoked.json.revocable, false);
    assert.ok(!revoked.text.includes(stored.deleteToken));
    assert.ok(!paste.pastes.has(pasteId), "the service deleted the paste");
    assert.deepEqual(await paste.read(pasteId), { status: 1, message: "Paste does not exist, has expired or has been deleted." });
    assert.throws(() => paste.open(shared.url), /no paste/);
    assert.equal(await revocations(t, "success"), successBefore + 1);

    const after = await t.request("GET", `/api/v1/shares/${shared.id}`, { token: admin });
    assert.equal(after.json.revokedBy, "admin", "the revocation is durable");
    assert.ok(paste.pastes.has(new URL(first.url).search.slice(1)), "the other share is untouched");

    const audit = await t.audit.page({ skip: 0, pageSize: 50, filter: { resourceType: "share" } });
    const actions = audit.data.filter((e) => e.resourceId === shared.id).map((e) => e.action);
    assert.deepEqual(actions.sort(), ["share.create", "share.revoke"]);
    const revokeEntry = audit.data.find((e) => e.action === "share.revoke" && e.resourceId === shared.id)!;
    assert.equal(revokeEntry.username, "admin");
    assert.equal(JSON.parse(revokeEntry.after!).revokedBy, "admin");
    assert.ok(!JSON.stringify(audit.data).includes(stored.deleteToken), "the audit log never carries a delete token");
    assert.ok(!t.logLines.join("\n").includes(stored.deleteToken), "nor do the process logs");
  });

  it("answers 409 SHARE_ALREADY_REVOKED to a second revoke and 404 NOT_FOUND to an unknown id, asking the service nothing", async () => {
    const shared = await shareLogs();
    assert.equal((await t.request("DELETE", `/api/v1/shares/${shared.id}`, { token: admin })).status, 200);
    const requests = paste.requests.length;
    const counted = await Promise.all(["success", "error", "missing-token"].map((o) => revocations(t, o)));
    const again = await t.request("DELETE", `/api/v1/shares/${shared.id}`, { token: admin });
    assert.equal(again.status, 409, again.text);
    assert.equal(again.json.error.code, "SHARE_ALREADY_REVOKED");
    assert.equal(again.json.error.status, 409);
    for (const path of ["/api/v1/shares/000000000000000000000000", "/api/v1/shares/no-such-share"]) {
      const missing = await t.request("DELETE", path, { token: admin });
      assert.equal(missing.status, 404, missing.text);
      assert.equal(missing.json.error.code, "NOT_FOUND");
      assert.equal((await t.request("GET", path, { token: admin })).status, 404);
    }
    assert.equal(paste.requests.length, requests);
    assert.deepEqual(await Promise.all(["success", "error", "missing-token"].map((o) => revocations(t, o))), counted);
  });

  it("answers 502 PASTE_UPSTREAM_ERROR when the service fails, leaving the record revocable for a retry", async () => {
    const shared = await shareLogs();
    const pasteId = new URL(shared.url).search.slice(1);
    const errorsBefore = await revocations(t, "error");
    paste.failWith = 500;
    try {
      const res = await t.request("DELETE", `/api/v1/shares/${shared.id}`, { token: admin });
      assert.equal(res.status, 502, res.text);
      assert.equal(res.json.error.code, "PASTE_UPSTREAM_ERROR");
    } finally {
      paste.failWith = null;
    }
    assert.equal(await revocations(t, "error"), errorsBefore + 1);
    assert.match(await t.metrics.render(), /cloud_share_upstream_errors_total\{status="500"\} [1-9]/);
    const record = await t.request("GET", `/api/v1/shares/${shared.id}`, { token: admin });
    assert.equal(record.json.revokedAt, null);
    assert.equal(record.json.revocable, true);
    assert.ok(paste.pastes.has(pasteId));
    const audit = await t.audit.page({ skip: 0, pageSize: 50, filter: { action: "share.revoke" } });
    assert.ok(!audit.data.some((e) => e.resourceId === shared.id), "a failed revoke is not audited");

    const retry = await t.request("DELETE", `/api/v1/shares/${shared.id}`, { token: admin });
    assert.equal(retry.status, 200, retry.text);
    assert.ok(!paste.pastes.has(pasteId));
  });

  it("answers 502 when the service refuses the delete (a wrong token), counted as an error", async () => {
    const shared = await shareLogs();
    const pasteId = new URL(shared.url).search.slice(1);
    paste.pastes.get(pasteId)!.deleteToken = "changed-at-the-service";
    const errorsBefore = await revocations(t, "error");
    const res = await t.request("DELETE", `/api/v1/shares/${shared.id}`, { token: admin });
    assert.equal(res.status, 502, res.text);
    assert.match(res.json.error.message, /Wrong deletion token/);
    assert.equal(await revocations(t, "error"), errorsBefore + 1);
    assert.ok(paste.pastes.has(pasteId));
    assert.equal((await t.request("GET", `/api/v1/shares/${shared.id}`, { token: admin })).json.revocable, true);
  });

  it("answers 409 SHARE_NOT_REVOCABLE for a share whose service gave no delete token, counted as missing-token", async () => {
    paste.withoutDeleteTokens = true;
    let shared: { id: string; deleteUrl: string };
    try {
      shared = await shareLogs();
    } finally {
      paste.withoutDeleteTokens = false;
    }
    assert.equal(shared.deleteUrl, "");
    const record = await t.request("GET", `/api/v1/shares/${shared.id}`, { token: admin });
    assert.equal(record.json.revocable, false);
    const before = await revocations(t, "missing-token");
    const requests = paste.requests.length;
    const res = await t.request("DELETE", `/api/v1/shares/${shared.id}`, { token: admin });
    assert.equal(res.status, 409, res.text);
    assert.equal(res.json.error.code, "SHARE_NOT_REVOCABLE");
    assert.equal(await revocations(t, "missing-token"), before + 1);
    assert.equal(paste.requests.length, requests, "nothing was sent");
    assert.equal((await t.request("GET", `/api/v1/shares/${shared.id}`, { token: admin })).json.revokedAt, null);
  });

  it("records the crash and diagnostics shares too, each with its id, kind and audit entry", async () => {
    const crash = await t.crashes.record({
      instanceId: "x-1",
      group: "x",
      nodeId: "n",
      exitCode: 1,
      classification: "EXCEPTION",
      logTail: ["boom"],
      uptimeMs: 1,
    });
    const crashShare = await t.request("POST", `/api/v1/crashes/${crash.id}/share`, { token: admin, body: { expiry: "30d" } });
    const diagShare = await t.request("POST", "/api/v1/system/diagnostics/share", { token: admin, body: { logLines: 0 } });
    assert.equal(crashShare.status, 200, crashShare.text);
    assert.equal(diagShare.status, 200, diagShare.text);
    const list = (await t.request("GET", "/api/v1/shares", { token: admin })).json as { id: string; kind: string; expiry: string }[];
    assert.deepEqual(
      list.slice(0, 2).map((r) => [r.id, r.kind]),
      [
        [diagShare.json.id, "diagnostics"],
        [crashShare.json.id, "crash"],
      ],
    );
    assert.equal(list[1]!.expiry, "30d");
    const audit = await t.audit.page({ skip: 0, pageSize: 100, filter: { action: "share.create" } });
    for (const id of [crashShare.json.id, diagShare.json.id]) {
      const entry = audit.data.find((e) => e.resourceId === id);
      assert.ok(entry, `share.create audited for ${id}`);
      assert.ok(!entry.details.includes("password") && !entry.details.includes("deletetoken"), entry.details);
    }
  });

  it("keeps the delete token in the stored record only", async () => {
    const shared = await shareLogs();
    const stored = await t.documents.collection(SHARES_COLLECTION).get(shared.id);
    const token = new URL(shared.deleteUrl).searchParams.get("deletetoken");
    assert.ok(token);
    assert.equal(stored?.deleteToken, token);
    const diagnostics = await t.request("GET", "/api/v1/system/diagnostics?logLines=2000&logLevel=TRACE", { token: admin });
    assert.ok(!diagnostics.text.includes(token), "the diagnostics bundle does not carry it");
  });

  it("refuses VIEWER and OPERATOR (share.invoke is ADMIN's) and changes nothing", async () => {
    const shared = await shareLogs();
    for (const role of ["VIEWER", "OPERATOR"]) {
      const token = await t.tokenFor(role);
      for (const [method, path] of [
        ["GET", "/api/v1/shares"],
        ["GET", `/api/v1/shares/${shared.id}`],
        ["DELETE", `/api/v1/shares/${shared.id}`],
      ] as const) {
        const res = await t.request(method, path, { token });
        assert.equal(res.status, 403, `${role} ${method} ${path}`);
        assert.equal(res.json.error.code, "FORBIDDEN");
      }
    }
    assert.equal((await t.request("GET", "/api/v1/shares", { token: null })).status, 401);
    assert.equal((await t.request("GET", `/api/v1/shares/${shared.id}`, { token: admin })).json.revokedAt, null);
    for (const query of ["limit=0", "limit=501", "limit=many"]) {
      const bad = await t.request("GET", `/api/v1/shares?${query}`, { token: admin });
      assert.equal(bad.status, 422, query);
      assert.equal(bad.json.error.code, "VALIDATION_ERROR");
    }
  });
});

describe("revoking with sharing switched off", () => {
  it("still revokes what was shared while it was on, at the service it was uploaded to", async () => {
    const paste = await startPrivateBinServer();
    try {
      const on = await startTestApp({ config: { share: { enabled: true, serviceUrl: paste.url } } });
      let sharedId: string;
      let records: Doc[];
      try {
        const res = await on.request("POST", "/api/v1/system/logs/share", { token: await on.tokenFor("ADMIN"), body: {} });
        assert.equal(res.status, 200, res.text);
        sharedId = res.json.id;
        records = await on.documents.collection(SHARES_COLLECTION).find();
      } finally {
        await on.close();
      }

      // Another controller's records, read from the shared store, with uploads switched off and pointed elsewhere.
      const off = await startTestApp({ config: { share: { enabled: false, serviceUrl: "http://127.0.0.1:9/" } } });
      try {
        for (const doc of records) await off.documents.collection(SHARES_COLLECTION).put(doc);
        const admin = await off.tokenFor("ADMIN");
        const listed = await off.request("GET", "/api/v1/shares", { token: admin });
        assert.deepEqual(
          listed.json.map((r: { id: string }) => r.id),
          [sharedId],
        );
        const revoked = await off.request("DELETE", `/api/v1/shares/${sharedId}`, { token: admin });
        assert.equal(revoked.status, 200, revoked.text);
        assert.equal(paste.pastes.size, 0, "deleted at the service it was uploaded to, whatever share.serviceUrl says now");
      } finally {
        await off.close();
      }
    } finally {
      await paste.close();
    }
  });
});

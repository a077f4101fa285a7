// Backup and restore through the REST API of a real controller (embedded store): create, list,
// show, download, verify, retention, delete, restore (dry run, both parts, one part), the 400 and
// 422 answers, tokens issued before a restore, and a bundle uploaded to a second controller.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { gunzipSync, gzipSync } from "node:zlib";
import { ADMIN_PASSWORD, startTestApp, type TestApp } from "../support/http-app.js";
import { dumpCollections, populate, SMALL_SCALE, templateVersionDigests } from "./backup-fixtures.js";

interface IdList {
  count: number;
  ids: string[];
}

describe("backup routes (embedded store)", () => {
  let t: TestApp;
  let admin: string;

  before(async () => {
    t = await startTestApp({ config: { backup: { retentionCount: 3 } } });
    admin = await t.login("admin", ADMIN_PASSWORD);
    await populate(t, SMALL_SCALE, "a");
  });
  after(() => t.close());

  it("creates a bundle whose manifest names what it holds, lists, shows, downloads and verifies it", async () => {
    const created = await t.request("POST", "/api/v1/backups", { token: admin });
    assert.equal(created.status, 201, created.text);
    const record = created.json;
    assert.match(record.id, /^[0-9]{8}T[0-9]{9}Z-[0-9a-f]{8}$/);
    const counts = Object.fromEntries(record.collections.map((c: { name: string; documentCount: number }) => [c.name, c.documentCount]));
    assert.equal(counts.groups, SMALL_SCALE.groups);
    assert.equal(counts.instances, SMALL_SCALE.instances);
    assert.equal(counts.users, SMALL_SCALE.users + 1);
    assert.equal(
      record.mongoDocumentCount,
      Object.values(counts as Record<string, number>).reduce((a, b) => a + b, 0),
    );
    assert.ok(!("system_secrets" in counts) && !("cluster_meta" in counts) && !("cluster_ca" in counts), "identity and secrets stay out");
    assert.equal(record.profile, "development");
    assert.equal(record.documentStore, "embedded");
    assert.equal(record.controller.nodeId, t.cluster.nodeId);
    assert.ok(record.blobs.count > 0 && record.blobs.totalBytes >= SMALL_SCALE.templateFileBytes);

    const listed = await t.request("GET", "/api/v1/backups", { token: admin });
    assert.equal(listed.status, 200);
    assert.deepEqual(
      listed.json.map((r: { id: string }) => r.id),
      [record.id],
    );
    assert.deepEqual((await t.request("GET", `/api/v1/backups/${record.id}`, { token: admin })).json, record);

    const download = await fetch(`${t.baseUrl}/api/v1/backups/${record.id}/download`, { headers: { authorization: `Bearer ${admin}` } });
    assert.equal(download.status, 200);
    const bytes = Buffer.from(await download.arrayBuffer());
    assert.equal(bytes.byteLength, record.sizeBytes);
    assert.equal(createHash("sha256").update(bytes).digest("hex"), record.sha256);
    assert.ok(gunzipSync(bytes).includes(Buffer.from("manifest.json")));

    const verified = await t.request("POST", `/api/v1/backups/${record.id}/verify`, { token: admin });
    assert.equal(verified.status, 200);
    assert.deepEqual(verified.json, {
      id: record.id,
      valid: true,
      missingFiles: [],
      missingDirectories: [],
      missingMongoCollections: [],
      missingMongoCollectionPrefixes: [],
      missingRedisPrefixes: [],
      emptyRequiredFiles: [],
      checksumMismatches: [],
      problems: [],
      authenticated: true,
    });
  });

  it("answers 404 for an unknown backup, 400 VALIDATION_ERROR for a restore without id, 403 without the permission", async () => {
    for (const [method, path] of [
      ["GET", "/api/v1/backups/20200101T000000000Z-00000000"],
      ["POST", "/api/v1/backups/20200101T000000000Z-00000000/verify"],
      ["GET", "/api/v1/backups/nonsense/download"],
      ["DELETE", "/api/v1/backups/nonsense"],
    ] as const) {
      const res = await t.request(method, path, { token: admin });
      assert.equal(res.status, 404, `${method} ${path}`);
      assert.equal(res.json.error.status, 404);
    }
    const missingId = await t.request("POST", "/api/v1/restore", { token: admin, body: { dryRun: true } });
    assert.equal(missingId.status, 400);
    assert.equal(missingId.json.error.code, "VALIDATION_ERROR");
    const blankId = await t.request("POST", "/api/v1/restore", { token: admin, body: { id: " " } });
    assert.equal(blankId.status, 400);
    const unknown = await t.request("POST", "/api/v1/restore", { token: admin, body: { id: "20200101T000000000Z-00000000" } });
    assert.equal(unknown.status, 404);
    const operator = await t.tokenFor("OPERATOR");
    assert.equal((await t.request("POST", "/api/v1/restore", { token: operator, body: { id: "x" } })).status, 403);
    const viewer = await t.tokenFor("VIEWER");
    assert.equal((await t.request("POST", "/api/v1/backups", { token: viewer })).status, 403);
    assert.equal((await t.request("GET", "/api/v1/backups", { token: viewer })).status, 200);
  });

  it("prunes to backup.retentionCount, oldest first, and deletes on request", async () => {
    const ids: string[] = [];
    for (let n = 0; n < 3; n++) {
      const res = await t.request("POST", "/api/v1/backups", { token: admin });
      assert.equal(res.status, 201, res.text);
      ids.push(res.json.id);
    }
    const listed = (await t.request("GET", "/api/v1/backups", { token: admin })).json.map((r: { id: string }) => r.id);
    assert.equal(listed.length, 3);
    assert.deepEqual(listed, [...ids].sort().reverse());
    const files = (await readdir(join(t.dir, "backups"))).filter((f) => f.endsWith(".tar.gz"));
    assert.equal(files.length, 3, "pruned bundles are gone from disk");
    const deleted = await t.request("DELETE", `/api/v1/backups/${ids[0]}`, { token: admin });
    assert.equal(deleted.status, 200);
    assert.equal((await t.request("GET", `/api/v1/backups/${ids[0]}`, { token: admin })).status, 404);
  });

  it("a dry run reports and changes nothing; a restore brings every collection and template version back; earlier tokens stop verifying", async () => {
    const record = (await t.request("POST", "/api/v1/backups", { token: admin })).json;
    const before = await dumpCollections(t.documents);
    const versionsBefore = await templateVersionDigests(t.templates);

    // Changes after the backup: more data, a deleted group, a new template version and blob.
    await populate(t, { ...SMALL_SCALE, users: 1, templates: 1 }, "b");
    await t.groups.delete("a-group-3").catch(() => undefined);
    await t.templates.writeText("a-template-0", "extra.txt", "written after the backup");
    const changed = await dumpCollections(t.documents);
    assert.notDeepEqual(changed, before);
    const viewerBefore = await t.login("a-user-0", "password-a-0-long");

    const dry = await t.request("POST", "/api/v1/restore", { token: admin, body: { id: record.id, dryRun: true } });
    assert.equal(dry.status, 200, dry.text);
    assert.equal(dry.json.dryRun, true);
    assert.equal(dry.json.filesystem.applied, false);
    assert.equal(dry.json.filesystem.entryCount, record.blobs.count);
    assert.equal(dry.json.datastores.applied, false);
    assert.ok(dry.json.datastores.mongoCollections.includes("groups"));
    assert.ok(dry.json.datastores.mongoPrefixGroups.includes("template"));
    assert.deepEqual(dry.json.datastores.redisPrefixes, ["cloud:v1:lease-token:", "cloud:v1:events:sequence", "cloud:v1:module-kv:"]);
    assert.deepEqual(await dumpCollections(t.documents), changed, "a dry run changes nothing");
    // The diff: what the restore would add back (in the bundle, gone here), replace (other content)
    // and remove (written after the backup), per collection, against the dumps (users' tokenVersion
    // aside: a restore raises every one). The bundle was written before its own creation was audited.
    const bundledDocs = structuredClone(before);
    bundledDocs.audit_log = bundledDocs.audit_log.filter((e) => !(e.action === "backup.create" && e.resourceId === record.id));
    const text = (name: string, doc: Record<string, unknown>) => JSON.stringify(name === "users" ? { ...doc, tokenVersion: undefined } : doc);
    const diffs = dry.json.diff.collections as { name: string; added: IdList; replaced: IdList; removed: IdList; unchanged: number }[];
    assert.deepEqual(diffs.map((d) => d.name).sort(), [...dry.json.datastores.mongoCollections].sort(), "one diff per bundled collection");
    for (const diff of diffs) {
      const inBundle = new Map((bundledDocs[diff.name] ?? []).map((d) => [d._id, text(diff.name, d)]));
      const here = new Map((changed[diff.name] ?? []).map((d) => [d._id, text(diff.name, d)]));
      const expected = {
        added: [...inBundle.keys()].filter((id) => !here.has(id)),
        replaced: [...inBundle.keys()].filter((id) => here.has(id) && here.get(id) !== inBundle.get(id)),
        removed: [...here.keys()].filter((id) => !inBundle.has(id)),
      };
      for (const kind of ["added", "replaced", "removed"] as const) {
        assert.equal(diff[kind].count, expected[kind].length, `${diff.name} ${kind}: ${JSON.stringify(diff[kind])} vs ${JSON.stringify(expected[kind])}`);
        assert.equal(diff[kind].ids.length, Math.min(expected[kind].length, 20), `${diff.name} ${kind}: at most 20 ids`);
        for (const id of diff[kind].ids) assert.ok(expected[kind].includes(id), `${diff.name} ${kind} ${id}`);
      }
      assert.equal(diff.unchanged, inBundle.size - expected.added.length - expected.replaced.length, `${diff.name} unchanged`);
    }
    const groupsDiff = diffs.find((d) => d.name === "groups")!;
    assert.ok(groupsDiff.added.ids.includes("a-group-3"), "the group deleted after the backup comes back");
    assert.ok(groupsDiff.removed.count > 0 && groupsDiff.removed.ids.every((id) => id.startsWith("b-")), "groups made after the backup go");
    assert.ok(dry.json.diff.blobs.removed.count >= 1, "the blob written after the backup would be set aside");
    assert.equal(dry.json.diff.blobs.added.count, 0, "every bundled blob is still here");

    const restored = await t.request("POST", "/api/v1/restore", { token: admin, body: { id: record.id } });
    assert.equal(restored.status, 200, restored.text);
    assert.equal(restored.json.dryRun, false);
    assert.equal(restored.json.diff, null, "only a dry run computes a diff");
    assert.equal(restored.json.filesystem.applied, true);
    assert.equal(restored.json.datastores.applied, true);
    assert.equal(restored.json.filesystem.entryCount, record.blobs.count);
    const rollbackRoot: string = restored.json.filesystem.rollbackRoot;
    assert.ok(rollbackRoot.startsWith(join(t.dir, "backups", "rollback")));
    const setAside = await readdir(join(rollbackRoot, "blobs"));
    assert.ok(setAside.length >= 2, "blobs written after the backup were set aside");
    for (const hash of setAside)
      assert.equal(
        createHash("sha256")
          .update(await readFile(join(rollbackRoot, "blobs", hash)))
          .digest("hex"),
        hash,
      );

    const after = await dumpCollections(t.documents, { ignoreTokenVersions: true });
    const expected = structuredClone(before);
    for (const user of expected.users) delete user.tokenVersion;
    // The bundle was written before its own creation was audited.
    expected.audit_log = expected.audit_log.filter((e) => !(e.action === "backup.create" && e.resourceId === record.id));
    // The restore itself is audited after it, into the restored log.
    assert.equal(after.audit_log.filter((e) => e.action === "backup.restore").length, 1);
    after.audit_log = after.audit_log.filter((e) => e.action !== "backup.restore");
    assert.deepEqual(after, expected);
    assert.deepEqual(await templateVersionDigests(t.templates), versionsBefore);

    for (const token of [admin, viewerBefore]) {
      const res = await t.request("GET", "/api/v1/backups", { token });
      assert.equal(res.status, 401, "a token issued before the restore no longer verifies");
    }
    admin = await t.login("admin", ADMIN_PASSWORD);
    assert.equal((await t.request("GET", "/api/v1/backups", { token: admin })).status, 200);
    await assert.rejects(t.login("b-user-0", "password-b-0-long"), "a user created after the backup is gone");
  });

  it("refuses with 422 RESTORE_REJECTED a bundle whose part was altered on disk, writing nothing", async () => {
    const record = (await t.request("POST", "/api/v1/backups", { token: admin })).json;
    const path = join(t.dir, "backups", `${record.id}.tar.gz`);
    const tar = gunzipSync(await readFile(path));
    const at = tar.indexOf(Buffer.from('"a-group-1"'));
    assert.ok(at > 0);
    tar.write('"a-group-X"', at); // same length: the archive stays well-formed, the checksum does not
    await writeFile(path, gzipSync(tar));
    await t.groups.create({ name: "after-tamper", platform: "simulated" });
    const snapshot = await dumpCollections(t.documents);
    const verified = await t.request("POST", `/api/v1/backups/${record.id}/verify`, { token: admin });
    assert.equal(verified.json.valid, false);
    assert.ok(
      verified.json.checksumMismatches.some((part: string) => part.startsWith("documents/")),
      verified.text,
    );
    const refused = await t.request("POST", "/api/v1/restore", { token: admin, body: { id: record.id } });
    assert.equal(refused.status, 422);
    assert.equal(refused.json.error.code, "RESTORE_REJECTED");
    assert.deepEqual(await dumpCollections(t.documents), snapshot, "nothing was written");
  });

  it("restores only the datastores with filesystem false, and an upload to another cluster's controller restores there as foreign", async () => {
    const record = (await t.request("POST", "/api/v1/backups", { token: admin })).json;
    const download = Buffer.from(
      await (await fetch(`${t.baseUrl}/api/v1/backups/${record.id}/download`, { headers: { authorization: `Bearer ${admin}` } })).arrayBuffer(),
    );
    const other = await startTestApp();
    try {
      const otherAdmin = await other.login("admin", ADMIN_PASSWORD);
      const uploaded = await fetch(`${other.baseUrl}/api/v1/backups/upload`, {
        method: "POST",
        headers: { authorization: `Bearer ${otherAdmin}`, "content-type": "application/gzip" },
        body: download,
      });
      assert.equal(uploaded.status, 201, await uploaded.clone().text());
      const uploadedRecord = (await uploaded.json()) as { id: string; sha256: string };
      assert.equal(uploadedRecord.id, record.id);
      assert.equal(uploadedRecord.sha256, record.sha256);
      const again = await fetch(`${other.baseUrl}/api/v1/backups/upload`, {
        method: "POST",
        headers: { authorization: `Bearer ${otherAdmin}` },
        body: download,
      });
      assert.equal(again.status, 409);

      const dataOnly = await other.request("POST", "/api/v1/restore", { token: otherAdmin, body: { id: record.id, filesystem: false, foreign: true } });
      assert.equal(dataOnly.status, 200, dataOnly.text);
      assert.equal(dataOnly.json.filesystem.applied, false);
      assert.equal(dataOnly.json.filesystem.rollbackRoot, null);
      assert.equal((await other.blobs.list()).length, 0, "no blob was written");
      const full = await other.request("POST", "/api/v1/restore", {
        token: (await other.login("admin", ADMIN_PASSWORD)) as string,
        body: { id: record.id, foreign: true },
      });
      assert.equal(full.status, 200, full.text);
      const ours = await dumpCollections(t.documents, { ignoreTokenVersions: true });
      const theirs = await dumpCollections(other.documents, { ignoreTokenVersions: true });
      for (const name of Object.keys(ours)) if (name !== "audit_log") assert.deepEqual(theirs[name], ours[name], name);
      assert.deepEqual(await templateVersionDigests(other.templates), await templateVersionDigests(t.templates));
    } finally {
      await other.close();
    }
  });
});

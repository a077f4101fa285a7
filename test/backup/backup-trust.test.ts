// Backups are ADMIN data, and a bundle proves where it came from. Through the REST API of real
// controllers (embedded store, each its own single-member cluster): download and upload need
// BACKUPS_RESTORE; the hostile flow (an OPERATOR's changed bundle: own role raised to ADMIN, a
// planted signing key, checksums fixed, createdAt 2099) escalates nothing; a bundle of another
// cluster restores only with foreign: true and only for an ADMIN; one allowlist of collections; an
// upload's createdAt is the server's clock and retention keeps what was just made; a damaged backup
// is invalid, skipped by listing and retention and never stops a new backup; one verification at a
// time.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { readdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { ApiError } from "../../src/shared/errors.js";
import { ADMIN_PASSWORD, startTestApp, type TestApp } from "../support/http-app.js";
import { documentsOf, setDocuments, tamperBundle } from "./bundle-tamper.js";

const SIGNING_SECRET = { collection: "system_secrets", id: "jwt-signing-key" };

async function download(t: TestApp, token: string, id: string): Promise<Response> {
  return fetch(`${t.baseUrl}/api/v1/backups/${id}/download`, { headers: { authorization: `Bearer ${token}` } });
}

async function upload(t: TestApp, token: string, bytes: Uint8Array): Promise<{ status: number; json: any; text: string }> {
  const res = await fetch(`${t.baseUrl}/api/v1/backups/upload`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/gzip" },
    body: bytes,
  });
  const text = await res.text();
  return { status: res.status, text, json: text ? JSON.parse(text) : undefined };
}

/** The bundle file as it lies on the controller's disk (what a copy of it holds). */
const bundleOnDisk = (t: TestApp, id: string) => readFile(join(t.dir, "backups", `${id}.tar.gz`));
const listedIds = async (t: TestApp, token: string) => ((await t.request("GET", "/api/v1/backups", { token })).json as { id: string }[]).map((r) => r.id);
const forgedId = (n: number) => `20990101T000000000Z-${n.toString(16).padStart(8, "0")}`;

describe("backups are ADMIN data", () => {
  let t: TestApp;
  let admin: string;
  let operator: string;

  before(async () => {
    t = await startTestApp({ config: { backup: { retentionCount: 10 } } });
    admin = await t.login("admin", ADMIN_PASSWORD);
    operator = await t.tokenFor("OPERATOR");
    await t.groups.create({ name: "lobby", platform: "simulated" });
  });
  after(() => t.close());

  it("download and upload need BACKUPS_RESTORE: OPERATOR and VIEWER get 403, ADMIN gets the bundle", async () => {
    const created = await t.request("POST", "/api/v1/backups", { token: operator });
    assert.equal(created.status, 201, "OPERATOR still creates backups (BACKUPS_MANAGE)");
    const id = created.json.id as string;
    const viewer = await t.tokenFor("VIEWER");
    for (const token of [operator, viewer]) {
      const res = await download(t, token, id);
      assert.equal(res.status, 403);
      assert.equal(((await res.json()) as any).error.code, "FORBIDDEN");
    }
    const ok = await download(t, admin, id);
    assert.equal(ok.status, 200);
    const bytes = Buffer.from(await ok.arrayBuffer());
    assert.equal(bytes.byteLength, created.json.sizeBytes);

    const before = await listedIds(t, admin);
    const refused = await upload(t, operator, bytes);
    assert.equal(refused.status, 403, refused.text);
    assert.deepEqual(await listedIds(t, admin), before, "nothing was recorded");
  });

  it("the hostile flow: an OPERATOR's changed bundle escalates nothing", async () => {
    const created = await t.request("POST", "/api/v1/backups", { token: operator });
    assert.equal(created.status, 201);
    const id = created.json.id as string;
    assert.equal((await download(t, operator, id)).status, 403, "the OPERATOR cannot take the bundle away");
    // Say the OPERATOR got a copy anyway (a file left on a share, an ADMIN's download):
    const copy = await bundleOnDisk(t, id);
    const secretBefore = await t.documents.collection(SIGNING_SECRET.collection).get(SIGNING_SECRET.id);
    assert.ok(secretBefore);
    const raiseOwnRole = (entries: Parameters<Parameters<typeof tamperBundle>[1]>[0], manifest: Parameters<Parameters<typeof tamperBundle>[1]>[1]) => {
      const users = documentsOf(entries, "users");
      const me = users.find((u) => u.username === "operator-user");
      assert.ok(me, "the operator is in the bundle");
      me.roles = ["ADMIN"];
      setDocuments(entries, manifest, "users", users);
      manifest.createdAt = "2099-01-01T00:00:00.000Z";
    };
    const planted = await tamperBundle(copy, (entries, manifest) => {
      raiseOwnRole(entries, manifest);
      manifest.id = forgedId(1);
      setDocuments(entries, manifest, "system_secrets", [
        { _id: SIGNING_SECRET.id, value: randomBytes(32).toString("base64url"), createdAt: "2099-01-01T00:00:00.000Z" },
      ]);
    });
    const raised = await tamperBundle(copy, (entries, manifest) => {
      raiseOwnRole(entries, manifest);
      manifest.id = forgedId(2);
    });

    // The OPERATOR cannot upload it.
    assert.equal((await upload(t, operator, planted)).status, 403);
    assert.equal((await upload(t, operator, raised)).status, 403);
    // An ADMIN who is handed it: the planted key is refused outright.
    const withKey = await upload(t, admin, planted);
    assert.equal(withKey.status, 422, withKey.text);
    assert.equal(withKey.json.error.code, "INVALID_BUNDLE");
    assert.match(withKey.json.error.message, /system_secrets/);
    // Without the key it is a well-formed bundle, but not one this cluster made: recorded as foreign,
    // at the server's time, not the 2099 it claims.
    const beforeUpload = Date.now();
    const uploaded = await upload(t, admin, raised);
    assert.equal(uploaded.status, 201, uploaded.text);
    assert.equal(uploaded.json.foreign, true);
    const createdAtMs = Date.parse(uploaded.json.createdAt);
    assert.ok(createdAtMs >= beforeUpload - 1_000 && createdAtMs <= Date.now() + 1_000, uploaded.json.createdAt);
    const verified = await t.request("POST", `/api/v1/backups/${forgedId(2)}/verify`, { token: admin });
    assert.equal(verified.status, 200);
    assert.equal(verified.json.valid, false);
    assert.equal(verified.json.authenticated, false);
    assert.ok(
      verified.json.problems.some((p: string) => /not authenticated by this cluster/.test(p)),
      verified.text,
    );

    // The ADMIN's dry run says it is foreign; the restore is refused; nothing changes.
    const dry = await t.request("POST", "/api/v1/restore", { token: admin, body: { id: forgedId(2), dryRun: true } });
    assert.equal(dry.status, 422, dry.text);
    assert.equal(dry.json.error.code, "RESTORE_REJECTED");
    assert.match(dry.json.error.message, /foreign/);
    const restore = await t.request("POST", "/api/v1/restore", { token: admin, body: { id: forgedId(2) } });
    assert.equal(restore.status, 422, restore.text);
    assert.equal(restore.json.error.code, "RESTORE_REJECTED");
    assert.equal((await t.request("POST", "/api/v1/restore", { token: operator, body: { id: forgedId(2), foreign: true } })).status, 403);

    assert.deepEqual(await t.documents.collection(SIGNING_SECRET.collection).get(SIGNING_SECRET.id), secretBefore, "the signing secret is untouched");
    const again = await t.login("operator-user", "operator-user-password");
    const created2 = await t.request("POST", "/api/v1/users", { token: again, body: { username: "mallory", password: "mallory-password", roles: ["ADMIN"] } });
    assert.equal(created2.status, 403, "the operator still cannot create users");
    assert.deepEqual((await t.auth.users.findByUsername("operator-user"))?.roles, ["OPERATOR"]);
    assert.equal((await t.request("GET", "/api/v1/groups", { token: admin })).status, 200, "the admin's session was not ended by a restore");
  });
});

describe("a bundle proves which cluster made it", () => {
  let t: TestApp;
  let other: TestApp;
  let admin: string;

  before(async () => {
    [t, other] = await Promise.all([startTestApp(), startTestApp()]);
    admin = await t.login("admin", ADMIN_PASSWORD);
    await t.groups.create({ name: "ours", platform: "simulated" });
    await other.groups.create({ name: "theirs", platform: "simulated" });
  });
  after(async () => {
    await t.close();
    await other.close();
  });

  it("a bundle of this cluster verifies as authenticated and restores without a flag", async () => {
    const created = await t.request("POST", "/api/v1/backups", { token: admin });
    assert.equal(created.status, 201);
    assert.equal(created.json.foreign, false);
    assert.equal(created.json.clusterId, t.cluster.clusterId);
    const verified = await t.request("POST", `/api/v1/backups/${created.json.id}/verify`, { token: admin });
    assert.equal(verified.json.valid, true, verified.text);
    assert.equal(verified.json.authenticated, true);
    const dry = await t.request("POST", "/api/v1/restore", { token: admin, body: { id: created.json.id, dryRun: true } });
    assert.equal(dry.status, 200, dry.text);
    assert.equal(dry.json.foreign, false);
  });

  it("a bundle of another cluster restores only with foreign: true, and only for an ADMIN", async () => {
    const theirs = await other.backups.create();
    const otherAdmin = await other.login("admin", ADMIN_PASSWORD);
    const bytes = Buffer.from(await (await download(other, otherAdmin, theirs.id)).arrayBuffer());
    const uploaded = await upload(t, admin, bytes);
    assert.equal(uploaded.status, 201, uploaded.text);
    assert.equal(uploaded.json.foreign, true);
    assert.equal(uploaded.json.clusterId, other.cluster.clusterId);

    const verified = await t.request("POST", `/api/v1/backups/${theirs.id}/verify`, { token: admin });
    assert.equal(verified.status, 200);
    assert.equal(verified.json.valid, false);
    assert.equal(verified.json.authenticated, false);
    for (const dryRun of [true, false]) {
      const refused = await t.request("POST", "/api/v1/restore", { token: admin, body: { id: theirs.id, dryRun } });
      assert.equal(refused.status, 422, refused.text);
      assert.equal(refused.json.error.code, "RESTORE_REJECTED");
      assert.match(refused.json.error.message, /foreign: true/);
    }

    // BACKUPS_RESTORE without being an ADMIN: a foreign bundle replaces the users, so it is refused.
    await t.request("POST", "/api/v1/roles", {
      token: admin,
      body: { name: "RESTORER", description: "restores backups", permissions: ["BACKUPS_VIEW", "BACKUPS_RESTORE"] },
    });
    await t.auth.users.create({ username: "restorer", password: "restorer-password", roles: ["RESTORER"] });
    const restorer = await t.login("restorer", "restorer-password");
    const notAdmin = await t.request("POST", "/api/v1/restore", { token: restorer, body: { id: theirs.id, dryRun: true, foreign: true } });
    assert.equal(notAdmin.status, 403, notAdmin.text);
    assert.match(notAdmin.json.error.message, /ADMIN/);

    const dry = await t.request("POST", "/api/v1/restore", { token: admin, body: { id: theirs.id, dryRun: true, foreign: true } });
    assert.equal(dry.status, 200, dry.text);
    assert.equal(dry.json.foreign, true);
    assert.equal(dry.json.datastores.applied, false);
    assert.ok(await t.groups.get("ours"), "a dry run changes nothing");

    const restored = await t.request("POST", "/api/v1/restore", { token: admin, body: { id: theirs.id, foreign: true } });
    assert.equal(restored.status, 200, restored.text);
    assert.equal(restored.json.foreign, true);
    assert.equal(restored.json.datastores.applied, true);
    const token = await t.login("admin", ADMIN_PASSWORD);
    const names = ((await t.request("GET", "/api/v1/groups", { token })).json as { name: string }[]).map((g) => g.name);
    assert.deepEqual(names, ["theirs"]);
    const audit = await t.documents.collection("audit_log").find();
    const entry = audit.find((e) => e.action === "backup.restore" && e.resourceId === theirs.id);
    assert.equal(JSON.parse(String(entry?.details ?? "{}")).foreign, true, "the audit record says it was foreign");
  });
});

describe("one allowlist of collections", () => {
  let t: TestApp;
  let admin: string;
  let copy: Buffer;
  let record: any;

  before(async () => {
    t = await startTestApp();
    admin = await t.login("admin", ADMIN_PASSWORD);
    record = (await t.request("POST", "/api/v1/backups", { token: admin })).json;
    copy = await bundleOnDisk(t, record.id);
  });
  after(() => t.close());

  const withCollection = (name: string, n: number) =>
    tamperBundle(copy, (entries, manifest) => {
      manifest.id = forgedId(n);
      setDocuments(entries, manifest, name, [{ _id: "cluster", value: "planted" }]);
    });

  it("an upload carrying system_secrets, cluster_ca, cluster_meta or an unknown collection is refused", async () => {
    let n = 10;
    for (const name of ["system_secrets", "cluster_ca", "cluster_meta", "ghosts"]) {
      const res = await upload(t, admin, await withCollection(name, n++));
      assert.equal(res.status, 422, `${name}: ${res.text}`);
      assert.equal(res.json.error.code, "INVALID_BUNDLE");
      assert.match(res.json.error.message, new RegExp(name));
    }
    assert.deepEqual(await listedIds(t, admin), [record.id]);
  });

  it("such a bundle put beside the backups by hand verifies invalid and is not restored", async () => {
    const secretBefore = await t.documents.collection(SIGNING_SECRET.collection).get(SIGNING_SECRET.id);
    const bytes = await tamperBundle(copy, (entries, manifest) => {
      manifest.id = forgedId(20);
      setDocuments(entries, manifest, "system_secrets", [{ _id: SIGNING_SECRET.id, value: randomBytes(32).toString("base64url") }]);
    });
    const dir = join(t.dir, "backups");
    await writeFile(join(dir, `${forgedId(20)}.tar.gz`), bytes);
    const sha256 = createHash("sha256").update(bytes).digest("hex");
    await writeFile(join(dir, `${forgedId(20)}.json`), JSON.stringify({ ...record, id: forgedId(20), sizeBytes: bytes.byteLength, sha256 }));
    const verified = await t.request("POST", `/api/v1/backups/${forgedId(20)}/verify`, { token: admin });
    assert.equal(verified.status, 200, verified.text);
    assert.equal(verified.json.valid, false);
    assert.ok(
      verified.json.problems.some((p: string) => /system_secrets/.test(p)),
      verified.text,
    );
    for (const body of [
      { id: forgedId(20), dryRun: true },
      { id: forgedId(20), foreign: true },
    ]) {
      const res = await t.request("POST", "/api/v1/restore", { token: admin, body });
      assert.equal(res.status, 422, res.text);
      assert.equal(res.json.error.code, "RESTORE_REJECTED");
    }
    assert.deepEqual(await t.documents.collection(SIGNING_SECRET.collection).get(SIGNING_SECRET.id), secretBefore);
  });
});

describe("createdAt and retention", () => {
  let t: TestApp;
  let admin: string;

  before(async () => {
    t = await startTestApp({ config: { backup: { retentionCount: 2 } } });
    admin = await t.login("admin", ADMIN_PASSWORD);
  });
  after(() => t.close());

  it("an upload is dated by the server; a backup made a moment ago is never pruned", async () => {
    const first = (await t.request("POST", "/api/v1/backups", { token: admin })).json;
    const copy = await bundleOnDisk(t, first.id);
    for (const n of [30, 31]) {
      const forged = await tamperBundle(copy, (_entries, manifest) => {
        manifest.id = forgedId(n);
        manifest.createdAt = "2099-01-01T00:00:00.000Z";
      });
      const before = Date.now();
      const res = await upload(t, admin, forged);
      assert.equal(res.status, 201, res.text);
      const at = Date.parse(res.json.createdAt);
      assert.ok(at >= before - 1_000 && at <= Date.now() + 1_000, `createdAt ${res.json.createdAt} is the server's time`);
      assert.equal(res.json.manifestCreatedAt, "2099-01-01T00:00:00.000Z", "the manifest's date is kept as information");
      assert.ok((await listedIds(t, admin)).includes(forgedId(n)), "the upload itself is kept");
    }
    const made = await t.request("POST", "/api/v1/backups", { token: admin });
    assert.equal(made.status, 201);
    assert.deepEqual(await listedIds(t, admin), [made.json.id, forgedId(31)], "newest first by the server's time; the oldest pruned");

    // A record dated in the future on disk (as uploads were dated before): a new backup still stays.
    const recordPath = join(t.dir, "backups", `${forgedId(31)}.json`);
    const future = JSON.parse(await readFile(recordPath, "utf8"));
    await writeFile(recordPath, JSON.stringify({ ...future, createdAt: "2099-06-01T00:00:00.000Z" }));
    for (let n = 0; n < 2; n++) {
      const next = await t.request("POST", "/api/v1/backups", { token: admin });
      assert.equal(next.status, 201);
      assert.ok((await listedIds(t, admin)).includes(next.json.id), "the backup just made is kept");
    }
  });
});

describe("a damaged backup", () => {
  let t: TestApp;
  let admin: string;

  before(async () => {
    t = await startTestApp({ config: { backup: { retentionCount: 3 } } });
    admin = await t.login("admin", ADMIN_PASSWORD);
    await t.groups.create({ name: "lobby", platform: "simulated" });
  });
  after(() => t.close());

  const create = async () => {
    const res = await t.request("POST", "/api/v1/backups", { token: admin });
    assert.equal(res.status, 201, res.text);
    return res.json.id as string;
  };
  const assertInvalid = async (id: string, finding: RegExp) => {
    const verified = await t.request("POST", `/api/v1/backups/${id}/verify`, { token: admin });
    assert.equal(verified.status, 200, verified.text);
    assert.equal(verified.json.valid, false);
    assert.match(JSON.stringify(verified.json), finding);
    for (const dryRun of [true, false]) {
      const restore = await t.request("POST", "/api/v1/restore", { token: admin, body: { id, dryRun } });
      assert.equal(restore.status, 422, restore.text);
      assert.equal(restore.json.error.code, "RESTORE_REJECTED");
    }
  };

  it("64 flipped bytes in its record: invalid, not listed, and backups go on", async () => {
    const id = await create();
    const path = join(t.dir, "backups", `${id}.json`);
    const bytes = await readFile(path);
    for (let i = 0; i < 64; i++) bytes[40 + i] ^= 0x5a;
    await writeFile(path, bytes);
    const listed = await t.request("GET", "/api/v1/backups", { token: admin });
    assert.equal(listed.status, 200, listed.text);
    assert.ok(!listed.json.some((r: { id: string }) => r.id === id));
    const shown = await t.request("GET", `/api/v1/backups/${id}`, { token: admin });
    assert.equal(shown.status, 422, shown.text);
    assert.equal(shown.json.error.code, "BACKUP_DAMAGED");
    await assertInvalid(id, /record/);
    const next = await create();
    assert.ok((await listedIds(t, admin)).includes(next));
    assert.equal((await t.request("DELETE", `/api/v1/backups/${id}`, { token: admin })).status, 200, "a damaged backup can be deleted");
    assert.ok(!(await readdir(join(t.dir, "backups"))).some((f) => f.startsWith(id)));
  });

  it("a truncated archive: invalid, not listed, not counted by retention, and backups go on", async () => {
    const id = await create();
    const path = join(t.dir, "backups", `${id}.tar.gz`);
    const bytes = await readFile(path);
    await writeFile(path, bytes.subarray(0, Math.floor(bytes.byteLength / 2)));
    assert.ok(!(await listedIds(t, admin)).includes(id));
    await assertInvalid(id, /tar.gz|gzip|malformed/);
    for (let n = 0; n < 4; n++) await create();
    assert.equal((await listedIds(t, admin)).length, 3);
    assert.ok((await readdir(join(t.dir, "backups"))).includes(`${id}.tar.gz`), "retention leaves the damaged one alone");
  });

  it("bytes flipped inside the archive (same size): verify and restore find it", async () => {
    const id = await create();
    const path = join(t.dir, "backups", `${id}.tar.gz`);
    const bytes = await readFile(path);
    for (let i = 0; i < 64; i++) bytes[Math.floor(bytes.byteLength / 2) + i] ^= 0xff;
    await writeFile(path, bytes);
    await assertInvalid(id, /gzip|malformed|checksum|problems":\["/);
    await create();
  });

  it("no temporary record or bundle is left beside the backups", async () => {
    const names = await readdir(join(t.dir, "backups"));
    assert.deepEqual(
      names.filter((n) => n.endsWith(".partial")),
      [],
    );
  });
});

describe("one verification at a time", () => {
  let t: TestApp;
  let admin: string;

  before(async () => {
    t = await startTestApp();
    admin = await t.login("admin", ADMIN_PASSWORD);
  });
  after(() => t.close());

  it("a second verification while one runs answers 503 VERIFY_BUSY; a restore waits for its turn", async () => {
    const held = await t.backups.create();
    const other = await t.backups.create();
    // The first verification reads from a pipe nobody writes yet, so it runs until the test lets it.
    const path = join(t.dir, "backups", `${held.id}.tar.gz`);
    const bytes = await readFile(path);
    await rename(path, `${path}.aside`);
    execFileSync("mkfifo", [path]);
    try {
      const first = t.backups.verify(held.id);
      const second = await t.request("POST", `/api/v1/backups/${other.id}/verify`, { token: admin });
      assert.equal(second.status, 503, second.text);
      assert.equal(second.json.error.code, "VERIFY_BUSY");
      assert.equal(second.headers.get("retry-after"), "5");
      await assert.rejects(t.backups.verify(other.id), (err: unknown) => err instanceof ApiError && err.code === "VERIFY_BUSY");
      const dry = t.request("POST", "/api/v1/restore", { token: admin, body: { id: other.id, dryRun: true } });
      await writeFile(path, bytes);
      assert.equal((await first).id, held.id);
      assert.equal((await dry).status, 200, "the dry run waited for the verification slot");
    } finally {
      await rm(path, { force: true });
      await rename(`${path}.aside`, path);
    }
    const after = await t.request("POST", `/api/v1/backups/${held.id}/verify`, { token: admin });
    assert.equal(after.status, 200);
    assert.equal(after.json.valid, true, after.text);
  });

  it("a verification gives the event loop a turn at least once per MiB it reads", async () => {
    // Documents of 2 MiB of text: what JSON.parse and sha256 cost is on the controller's loop.
    const instances = t.documents.collection("instances");
    const filler = "x".repeat(1_000);
    for (let n = 0; n < 2_048; n++) await instances.put({ _id: `i-${n}`, group: "g", filler });
    const record = await t.backups.create();
    let turns = 0;
    let counting = true;
    const tick = () => {
      turns++;
      if (counting) setImmediate(tick);
    };
    setImmediate(tick);
    const report = await t.backups.verify(record.id);
    counting = false;
    assert.equal(report.valid, true);
    assert.ok(turns >= 2, `the loop turned ${turns} times during the verification`);
  });
});

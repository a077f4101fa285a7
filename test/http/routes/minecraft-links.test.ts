/**
 * Minecraft account links on a real controller (real HTTP, the embedded store): an OPERATOR links
 * and unlinks its own account (audited as user.minecraft.link / unlink), a VIEWER may not, nobody
 * below ADMIN links another user; bad input gets the error envelope and changes nothing; one
 * account belongs to one user; the plugin's permission check answers with the linked user's roles,
 * false for an account nobody linked, and an unlink takes effect at the next check (the route and
 * the SDK's command sender); a linked staff account passes maintenance; a deleted user's accounts
 * are free again.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { CommandBuilder, CommandRegistry, NO_PERMISSION_MESSAGE, connectToCloud, linkedPlayerSender } from "../../../src/sdk/index.js";
import { minecraftLinksPerUserMax } from "../../../src/auth/minecraft-links.js";
import { startTestApp, type TestApp } from "../../support/http-app.js";

const uuid = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, "0")}`;
const OPERATOR_UUID = "6E1B7A4C-2F3D-4E5A-9B8C-7D6E5F4A3B2C";

describe("Minecraft account links", () => {
  let t: TestApp;
  let workload: string;
  let sequence = 1;
  const as = async (role: string) => ({ token: await t.tokenFor(role) });
  const linksOf = async (username: string) => (await t.auth.links.list(username)).map((l) => l.uuid);
  const auditActions = async () =>
    (await t.audit.keyset({ cursor: "", pageSize: 500 })).data
      .filter((e) => e.action.startsWith("user.minecraft."))
      .map((e) => `${e.action} ${e.resourceId} ${e.details}`);
  const check = (id: string, permission: string) => t.request("GET", `/api/plugin/players/${id}/permissions/${permission}`, { token: workload });

  before(async () => {
    t = await startTestApp({ config: { rateLimit: { perIpPerMinute: 1_000_000, perUserPerMinute: 1_000_000 } } });
    await t.groups.create({ name: "lobby", platform: "paper" });
    await t.nodes.upsert("n1", { host: "10.0.0.1" });
    await t.instances.save({
      id: "lobby-1",
      group: "lobby",
      node: "n1",
      port: 30000,
      memoryMb: 512,
      state: "RUNNING",
      playerCount: 0,
      startedAt: null,
      deploymentRevision: 1,
    });
    workload = t.credentials.issueWorkloadToken({ instanceId: "lobby-1", group: "lobby", node: "n1" }).token;
    for (const role of ["ADMIN", "OPERATOR", "VIEWER"]) await t.tokenFor(role);
  });
  after(() => t.close());

  it("an OPERATOR links its own account (201, then 200), audited once; reads it back", async () => {
    const first = await t.request("POST", "/api/v1/auth/me/minecraft", { ...(await as("OPERATOR")), body: { uuid: OPERATOR_UUID } });
    assert.equal(first.status, 201, first.text);
    assert.equal(first.json.uuid, OPERATOR_UUID.toLowerCase(), "stored lower case");
    assert.equal(first.json.username, "operator-user");
    assert.equal(first.json.linkedBy, "operator-user");
    const again = await t.request("POST", "/api/v1/auth/me/minecraft", { ...(await as("OPERATOR")), body: { uuid: OPERATOR_UUID.toLowerCase() } });
    assert.equal(again.status, 200, "linked already");
    const mine = await t.request("GET", "/api/v1/auth/me/minecraft", await as("OPERATOR"));
    assert.deepEqual(
      mine.json.map((l: { uuid: string }) => l.uuid),
      [OPERATOR_UUID.toLowerCase()],
    );
    assert.deepEqual(await auditActions(), [`user.minecraft.link operator-user {"uuid":"${OPERATOR_UUID.toLowerCase()}"}`]);
  });

  it("a VIEWER may not link itself and nobody below ADMIN links another user; nothing changes", async () => {
    const before = await auditActions();
    const viewer = await t.request("POST", "/api/v1/auth/me/minecraft", { ...(await as("VIEWER")), body: { uuid: uuid(1) } });
    assert.equal(viewer.status, 403, viewer.text);
    assert.deepEqual(viewer.json.error, { code: "FORBIDDEN", message: "Missing permission: minecraft.link", status: 403 });
    assert.equal((await t.request("GET", "/api/v1/auth/me/minecraft", await as("VIEWER"))).status, 200, "reading one's own links needs no permission");
    const other = await t.request("POST", "/api/v1/users/viewer-user/minecraft", { ...(await as("OPERATOR")), body: { uuid: uuid(1) } });
    assert.equal(other.status, 403, other.text);
    const unlinkOther = await t.request("DELETE", `/api/v1/users/operator-user/minecraft/${OPERATOR_UUID}`, await as("VIEWER"));
    assert.equal(unlinkOther.status, 403);
    assert.deepEqual(await linksOf("viewer-user"), []);
    assert.deepEqual(await linksOf("operator-user"), [OPERATOR_UUID.toLowerCase()]);
    assert.deepEqual(await auditActions(), before);
  });

  it("bad input gets the error envelope and changes nothing", async () => {
    const before = await auditActions();
    const admin = await as("ADMIN");
    for (const body of [{ uuid: "not-a-uuid" }, { uuid: "00000000000040008000000000000001" }, {}, { uuid: uuid(1), extra: true }, { uuid: 7 }]) {
      const res = await t.request("POST", "/api/v1/users/viewer-user/minecraft", { ...admin, body });
      assert.equal(res.status, 422, `${JSON.stringify(body)}: ${res.text}`);
      assert.equal(res.json.error.code, "VALIDATION_ERROR");
      assert.equal(res.json.error.status, 422);
    }
    const raw = await t.request("POST", "/api/v1/auth/me/minecraft", { ...admin, rawBody: "{not json" });
    assert.equal(raw.status, 400);
    assert.equal(raw.json.error.code, "BAD_REQUEST");
    const badPath = await t.request("DELETE", "/api/v1/users/operator-user/minecraft/nope", admin);
    assert.ok(badPath.status === 400 || badPath.status === 422, badPath.text);
    assert.equal(typeof badPath.json.error.code, "string");
    const unknownUser = await t.request("POST", "/api/v1/users/nobody/minecraft", { ...admin, body: { uuid: uuid(1) } });
    assert.equal(unknownUser.status, 404);
    const notLinked = await t.request("DELETE", `/api/v1/users/viewer-user/minecraft/${uuid(1)}`, admin);
    assert.equal(notLinked.status, 404);
    assert.equal(notLinked.json.error.code, "MINECRAFT_LINK_NOT_FOUND");
    const taken = await t.request("POST", "/api/v1/users/viewer-user/minecraft", { ...admin, body: { uuid: OPERATOR_UUID } });
    assert.equal(taken.status, 409);
    assert.equal(taken.json.error.code, "MINECRAFT_ACCOUNT_LINKED");
    const badCheck = await t.request("GET", "/api/plugin/players/nope/permissions/groups.view", { token: workload });
    assert.ok(badCheck.status === 400 || badCheck.status === 422, badCheck.text);
    assert.deepEqual(await linksOf("viewer-user"), []);
    assert.deepEqual(await linksOf("operator-user"), [OPERATOR_UUID.toLowerCase()]);
    assert.deepEqual(await auditActions(), before);
  });

  it("the plugin check answers with the linked user's roles, false when not linked; an unlink ends it at once", async () => {
    const linked = await check(OPERATOR_UUID.toLowerCase(), "groups.start");
    assert.equal(linked.status, 200, linked.text);
    assert.deepEqual(linked.json, { uuid: OPERATOR_UUID.toLowerCase(), permission: "groups.start", allowed: true });
    assert.equal((await check(OPERATOR_UUID, "users.manage")).json.allowed, false, "OPERATOR does not hold users.manage");
    assert.equal((await check(uuid(99), "groups.view")).json.allowed, false, "nobody linked it");
    const set = await t.request("GET", `/api/plugin/players/${uuid(99)}/permissions`, { token: workload });
    assert.deepEqual(set.json, { uuid: uuid(99), linked: false, permissions: [] });
    assert.equal(
      (await t.request("GET", `/api/plugin/players/${OPERATOR_UUID}/permissions/groups.view`, await as("ADMIN"))).status,
      401,
      "workload token only",
    );

    // The SDK: a command gated on a permission runs for the linked player, not for another.
    const sdk = connectToCloud({ env: {}, controllerUrl: t.baseUrl, token: workload, instanceId: "lobby-1", group: "lobby", kind: "server" });
    try {
      assert.equal(await sdk.client.checkPermission(OPERATOR_UUID, "groups.start"), true);
      assert.equal(await sdk.client.checkPermission(uuid(99), "groups.start"), false);
      const registry = new CommandRegistry();
      let ran = 0;
      registry.register(
        CommandBuilder.literal("scale")
          .permission("groups.start")
          .handler(() => void ran++)
          .build(),
      );
      const messages: string[] = [];
      const player = (id: string, name: string) => ({ uuid: id, name, sendMessage: (text: string) => void messages.push(text) });
      assert.equal(await registry.dispatch(await linkedPlayerSender(sdk.client, player(OPERATOR_UUID, "Op")), "scale"), "executed");
      assert.equal(await registry.dispatch(await linkedPlayerSender(sdk.client, player(uuid(99), "Guest")), "scale"), "failed");
      assert.equal(ran, 1);
      assert.ok(messages.some((m) => m.includes(NO_PERMISSION_MESSAGE)));

      const unlink = await t.request("DELETE", `/api/v1/auth/me/minecraft/${OPERATOR_UUID}`, await as("OPERATOR"));
      assert.equal(unlink.status, 204, unlink.text);
      assert.equal((await check(OPERATOR_UUID, "groups.start")).json.allowed, false, "the next check after the unlink");
      assert.equal(await sdk.client.checkPermission(OPERATOR_UUID, "groups.start"), false);
      assert.equal(await registry.dispatch(await linkedPlayerSender(sdk.client, player(OPERATOR_UUID, "Op")), "scale"), "failed");
      assert.equal(ran, 1);
    } finally {
      await sdk.close();
    }
    const actions = await auditActions();
    assert.equal(actions[0], `user.minecraft.unlink operator-user {"uuid":"${OPERATOR_UUID.toLowerCase()}"}`, "newest first");
  });

  it("a linked staff account passes global maintenance; an unlinked one does not", async () => {
    await t.capabilities.maintenance.update({ enabled: true, message: "closed" }, "test");
    const join = (id: string, name: string) =>
      t.request("POST", "/api/plugin/player-join", { token: workload, body: { uuid: id, name }, headers: { "x-cloud-sequence": String(++sequence) } });
    try {
      assert.equal((await join(uuid(10), "staff")).status, 403, "not linked yet");
      assert.equal((await t.request("POST", "/api/v1/auth/me/minecraft", { ...(await as("OPERATOR")), body: { uuid: uuid(10) } })).status, 201);
      const admitted = await join(uuid(10), "staff");
      assert.equal(admitted.status, 200, admitted.text);
      const guest = await join(uuid(11), "guest");
      assert.equal(guest.status, 403);
      assert.equal(guest.json.error.code, "MAINTENANCE");
    } finally {
      await t.capabilities.maintenance.update({ enabled: false }, "test");
    }
  });

  it("an ADMIN links and unlinks for anyone, at most a few accounts a user; a deleted user's accounts are free again", async () => {
    const admin = await as("ADMIN");
    const created = await t.request("POST", "/api/v1/users", { ...admin, body: { username: "builder", password: "builder-password", roles: ["VIEWER"] } });
    assert.equal(created.status, 201, created.text);
    for (let i = 0; i < minecraftLinksPerUserMax; i++) {
      const res = await t.request("POST", "/api/v1/users/builder/minecraft", { ...admin, body: { uuid: uuid(20 + i) } });
      assert.equal(res.status, 201, res.text);
      assert.equal(res.json.linkedBy, "admin");
    }
    const over = await t.request("POST", "/api/v1/users/builder/minecraft", { ...admin, body: { uuid: uuid(30) } });
    assert.equal(over.status, 409);
    assert.equal(over.json.error.code, "MINECRAFT_LINKS_MAX");
    const listed = await t.request("GET", "/api/v1/users/builder/minecraft", admin);
    assert.equal(listed.json.length, minecraftLinksPerUserMax);
    assert.equal((await check(uuid(20), "groups.view")).json.allowed, true, "VIEWER reads");
    assert.equal((await check(uuid(20), "groups.start")).json.allowed, false, "VIEWER does not start groups");
    assert.equal((await t.request("DELETE", `/api/v1/users/builder/minecraft/${uuid(24)}`, admin)).status, 204);

    assert.equal((await t.request("DELETE", "/api/v1/users/builder", admin)).status, 204);
    assert.equal((await check(uuid(20), "groups.view")).json.allowed, false, "a deleted user's account holds nothing");
    const reuse = await t.request("POST", "/api/v1/users/viewer-user/minecraft", { ...admin, body: { uuid: uuid(20) } });
    assert.equal(reuse.status, 201, "the account is free again");
    const actions = await auditActions();
    assert.ok(actions.includes(`user.minecraft.unlink builder {"uuid":"${uuid(24)}"}`));
    assert.equal(actions.filter((a) => a.startsWith("user.minecraft.link builder")).length, minecraftLinksPerUserMax);
  });
});

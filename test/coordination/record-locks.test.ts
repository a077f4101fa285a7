// Records several controllers write, under the cluster-wide record lock: two "controllers" here are
// two sets of services over one document store, each with its own KvMutex over one key-value store
// (what production has: one database, one Redis, a lock per process). A password change and a role
// change of one user through two controllers both take effect; two demotions of the last two
// admins leave one; a Minecraft account goes to one user and a user never passes the link limit;
// a lock held past its TTL by a long write is renewed, not stolen.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { RoleDirectory } from "../../src/auth/role-directory.js";
import { UserDirectory } from "../../src/auth/user-directory.js";
import { MinecraftLinks, minecraftLinksPerUserMax } from "../../src/auth/minecraft-links.js";
import { ApiError } from "../../src/shared/errors.js";
import { ADMIN_ROLE, OPERATOR_ROLE } from "../../src/auth/permissions.js";
import { KvMutex, mutexKey } from "../../src/coordination/kv-mutex.js";
import { KeyedMutex, type KeyedLock } from "../../src/domain/shared/keyed-mutex.js";
import { MemoryKvStore } from "../../src/store/memory/memory-kv-store.js";
import { openStoreFixture, type StoreFixture } from "../support/store-fixture.js";
import { TEST_SCRYPT } from "../support/http-app.js";

describe("record locks across controllers", () => {
  let fx: StoreFixture;
  const kv = new MemoryKvStore();

  before(async () => {
    fx = await openStoreFixture("cloud-record-locks-");
  });
  after(async () => {
    await fx.close();
    await kv.close();
  });

  const directoriesOn = (lock: KeyedLock) => {
    const roles = new RoleDirectory(fx.store, fx.clock, lock);
    return new UserDirectory(fx.store, roles, fx.clock, TEST_SCRYPT, () => undefined, lock);
  };
  const controllers = (lockOf: () => KeyedLock) => [directoriesOn(lockOf()), directoriesOn(lockOf())] as const;

  it("a password change and a role change of one user through two controllers both take effect", async () => {
    const round = async ([a, b]: readonly [UserDirectory, UserDirectory], username: string) => {
      await a.create({ username, password: "first-password-1", roles: [OPERATOR_ROLE] });
      await Promise.all([a.update(username, { password: "second-password-2" }), b.update(username, { roles: [ADMIN_ROLE, OPERATOR_ROLE] })]);
      const doc = (await a.findByUsername(username))!;
      return { tokenVersion: doc.tokenVersion, admin: doc.roles.includes(ADMIN_ROLE) };
    };
    const unguarded = [];
    for (let n = 0; n < 3; n++)
      unguarded.push(
        await round(
          controllers(() => new KeyedMutex()),
          `loose${n}`,
        ),
      );
    assert.ok(
      unguarded.some((r) => r.tokenVersion === 1 || !r.admin),
      `a lock per controller alone loses one of the two: ${JSON.stringify(unguarded)}`,
    );
    for (let n = 0; n < 3; n++) {
      const kept = await round(
        controllers(() => new KvMutex(kv).scoped("auth:")),
        `locked${n}`,
      );
      assert.deepEqual(kept, { tokenVersion: 2, admin: true }, `round ${n}: the new password's token version and the new role`);
    }
  });

  it("two demotions of the last two admins through two controllers leave one admin", async () => {
    const [a, b] = controllers(() => new KvMutex(kv).scoped("auth:"));
    // The first test's users hold ADMIN too: these two become the only admins.
    await a.create({ username: "admin-one", password: "admin-password-1", roles: [ADMIN_ROLE] });
    await a.create({ username: "admin-two", password: "admin-password-2", roles: [ADMIN_ROLE] });
    for (const user of await a.list())
      if (user.roles.includes(ADMIN_ROLE) && !user.username.startsWith("admin-")) await a.update(user.username, { roles: [OPERATOR_ROLE] });
    const results = await Promise.allSettled([a.update("admin-one", { roles: [OPERATOR_ROLE] }), b.update("admin-two", { roles: [OPERATOR_ROLE] })]);
    assert.deepEqual(
      results.map((r) => r.status),
      ["fulfilled", "rejected"],
      "the second demotion sees the first and is refused",
    );
    const admins = (await a.list()).filter((u) => u.roles.includes(ADMIN_ROLE)).map((u) => u.username);
    assert.deepEqual(admins, ["admin-two"]);
  });

  it("Minecraft links through two controllers: one account goes to one user, a user never passes the limit", async () => {
    const linksOn = (lock: KeyedLock) => {
      const roles = new RoleDirectory(fx.store, fx.clock, lock);
      const users = new UserDirectory(fx.store, roles, fx.clock, TEST_SCRYPT, () => undefined, lock);
      return { users, links: new MinecraftLinks(fx.store, users, roles, fx.clock, lock) };
    };
    const [a, b] = [linksOn(new KvMutex(kv).scoped("auth:")), linksOn(new KvMutex(kv).scoped("auth:"))];
    const account = (n: number) => `abcdef00-0000-4000-8000-${String(n).padStart(12, "0")}`;
    const codeOf = (r: PromiseSettledResult<unknown>) =>
      r.status === "fulfilled" ? "linked" : r.reason instanceof ApiError ? r.reason.code : String(r.reason);
    await a.users.create({ username: "steve", password: "steve-password", roles: [OPERATOR_ROLE] });
    await a.users.create({ username: "alex", password: "alex-password", roles: [OPERATOR_ROLE] });
    for (let round = 0; round < 3; round++) {
      const same = await Promise.allSettled([a.links.link("steve", account(100 + round), "steve"), b.links.link("alex", account(100 + round), "alex")]);
      assert.deepEqual(same.map(codeOf).sort(), ["MINECRAFT_ACCOUNT_LINKED", "linked"], `round ${round}: one user holds the account`);
    }
    const held = (await a.links.list("steve")).length;
    for (let n = held; n < minecraftLinksPerUserMax - 1; n++) await a.links.link("steve", account(200 + n), "steve");
    const last = await Promise.allSettled([a.links.link("steve", account(300), "steve"), b.links.link("steve", account(301), "steve")]);
    assert.deepEqual(last.map(codeOf).sort(), ["MINECRAFT_LINKS_MAX", "linked"], "the second sees the first");
    assert.equal((await a.links.list("steve")).length, minecraftLinksPerUserMax);
  });

  it("a holder working past the TTL keeps the lock (renewed every third of it); released after", async () => {
    const holder = new KvMutex(kv, { ttlMs: 300 });
    const other = new KvMutex(kv, { ttlMs: 300, waitMs: 700 });
    let release!: () => void;
    const working = holder.run("long", () => new Promise<void>((resolve) => (release = resolve)));
    await new Promise((resolve) => setTimeout(resolve, 50));
    await assert.rejects(
      other.run("long", async () => "entered"),
      (err: any) => err.code === "MUTEX_TIMEOUT",
      "still held after more than twice its TTL",
    );
    release();
    await working;
    assert.equal(await kv.get(mutexKey("long")), null);
    assert.equal(await other.run("long", async () => "entered"), "entered");
  });
});

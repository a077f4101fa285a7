/**
 * The dashboard when its controller dies, on a production cluster: three controller processes on
 * one PostgreSQL and one Redis (real servers), the page opened on controller a's own address and
 * signed in. a is killed (SIGKILL): the page finds it unreachable, moves to another member's
 * address carrying its sign-in and stream position, is live there without signing in again, and
 * shows a change made after the failover without a reload.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ClusterHarness, type ClusterMemberProcess } from "../cluster-harness.js";
import { startPostgresServer, type PostgresServer } from "../../support/postgres-server.js";
import { startRedisServer, type RedisServer } from "../../support/redis-server.js";
import { TEST_ADMIN_PASSWORD } from "../../support/controller.js";
import { eventually } from "../../support/wait.js";
import { launchBrowser, screenshotOnFailure, signIn, type Browser } from "./browser.js";

describe("the dashboard through a controller failover", { timeout: 900_000 }, () => {
  let postgres: PostgresServer;
  let redis: RedisServer;
  let harness: ClusterHarness;
  let members: ClusterMemberProcess[];
  let browser: Browser;

  before(async () => {
    [postgres, redis] = await Promise.all([startPostgresServer(), startRedisServer()]);
    harness = new ClusterHarness({ runtime: { profile: "production" }, database: { uri: postgres.uri }, kvstore: { uri: redis.uri } });
    members = await harness.startThree();
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await harness?.close();
    await redis?.stop();
    await postgres?.stop();
  });

  it("moves to another controller's address when its own is killed, and stays live there", { timeout: 600_000 }, async (t) => {
    let failed = true;
    try {
      const [a] = members;
      const page = await browser.newPage();
      await eventually(
        async () =>
          ((await a.call("GET", "/api/v1/cluster/members")).json.members as { restAddr: string }[]).filter((m) => m.restAddr && !m.restAddr.endsWith(":0"))
            .length === 3,
        "every member has announced its REST address",
        60_000,
      );
      await signIn(page, `${a.process!.url}/ui/`, "admin", TEST_ADMIN_PASSWORD);
      await page.locator('.stream[data-status="live"]').waitFor({ timeout: 60_000 });
      await page.locator("main").getByText("leader", { exact: true }).first().waitFor({ timeout: 60_000 });
      assert.equal(new URL(page.url()).port, String(a.httpPort));

      await harness.kill9(a);
      const others = members.slice(1).map((m) => String(m.httpPort));
      await eventually(() => others.includes(new URL(page.url()).port) || null, `the page moved to ${others.join(" or ")} (now ${page.url()})`, 120_000);
      const now = members.find((m) => String(m.httpPort) === new URL(page.url()).port)!;
      await page.locator('.stream[data-status="live"]').waitFor({ timeout: 90_000 });
      assert.equal(await page.getByLabel("Password").count(), 0, "still signed in: the sign-in came along");
      assert.ok(!page.url().includes("handoff"), "the handed-over token is gone from the address bar");

      // A change made now reaches the page over the new controller's stream, without a reload.
      let navigations = 0;
      page.on("framenavigated", (frame) => frame === page.mainFrame() && navigations++);
      const created = await now.call("POST", "/api/v1/groups", { name: "after-failover", platform: "simulated", minInstances: 0, maxInstances: 1 });
      assert.equal(created.status, 201, created.text);
      await page.locator(".events li", { hasText: "group after-failover created" }).waitFor({ timeout: 60_000 });
      assert.equal(navigations, 0);
      failed = false;
    } finally {
      await screenshotOnFailure(t, browser, failed);
    }
  });
});

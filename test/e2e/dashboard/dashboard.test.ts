/**
 * The dashboard in a real browser (Debian's Chromium through playwright-core) against a real
 * development controller with a real daemon running simulated game servers. In the order an
 * operator would go: sign in; create a group and watch its instances turn RUNNING without a reload;
 * open a console, send a command and see its output; crash a server and see the crash with its
 * reason; run a rolling deployment and watch it complete; edit a template file and roll it back;
 * drain a node; and, signed in as a VIEWER, find no button that writes. No page logs an error (a
 * Content-Security-Policy refusal would be one).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Page } from "playwright-core";
import { api, cleanupDirs, createToken, spawnDaemon, startGatewayController, type DaemonProcess, type GatewayController } from "../../gateway/harness.js";
import { TEST_ADMIN_PASSWORD } from "../../support/controller.js";
import { eventually } from "../../support/wait.js";
import { collectErrors, launchBrowser, screenshotOnFailure, signIn, type Browser } from "./browser.js";

const waitMs = 90_000;
const group = "lobby";
const portStart = 20_000 + Math.floor(Math.random() * 400) * 50;

/**
 * Waits until `check` holds, polling from the test (not by evaluating strings in the page: the
 * dashboard's CSP forbids that, as it should).
 */
const until = (what: string, check: () => Promise<boolean>, timeout = waitMs) => eventually(async () => ((await check()) ? true : null), what, timeout);
/** The texts of the rows of the table labelled `label`. */
const rowTexts = (page: Page, label: string) => page.locator(`table[aria-label="${label}"] tbody tr`).allTextContents();
const nav = (page: Page, name: string) => page.locator("nav#nav").getByRole("link", { name, exact: true }).click();

describe("the dashboard in Chromium", { timeout: 900_000 }, () => {
  let c: GatewayController;
  let daemon: DaemonProcess;
  let browser: Browser;
  let page: Page;
  let errors: string[];
  let failed = false;

  before(async () => {
    c = await startGatewayController({ scheduler: { evaluationIntervalMs: 1_000 } });
    daemon = spawnDaemon([c.grpcAddress], (await createToken(c)).token, { maxMemoryMb: 4096 });
    await eventually(async () => ((await api(c, "GET", "/api/v1/nodes")).json as unknown[]).length === 1, "the daemon's node", waitMs);
    browser = await launchBrowser();
    page = await browser.newPage();
    errors = collectErrors(page);
  });
  after(async () => {
    await browser?.close();
    await daemon?.stop();
    await c?.stop();
    cleanupDirs();
  });

  const step = (name: string, body: () => Promise<void>) =>
    it(name, { timeout: 240_000 }, async (t) => {
      try {
        await body();
      } catch (err) {
        failed = true;
        await screenshotOnFailure(t, browser, true);
        throw err;
      }
    });

  step("signs in and goes live over the event stream", async () => {
    await signIn(page, `${c.url}/ui/`, "admin", TEST_ADMIN_PASSWORD);
    await page.locator('.stream[data-status="live"]').waitFor();
    await page.locator('[data-stat="nodes"] .value', { hasText: "1" }).waitFor();
  });

  step("creates a group of the simulated platform and sees its instances turn RUNNING without a reload", async () => {
    await nav(page, "Groups");
    await page.getByRole("button", { name: "Create group" }).click();
    const form = page.getByRole("form", { name: "Create group" });
    await form.getByLabel("Name").fill(group);
    await form.getByLabel("Minimum instances").fill("2");
    await form.getByLabel("Maximum instances").fill("4");
    await form.getByLabel("Memory (MB)").fill("128");
    await form.getByLabel("Port range start").fill(String(portStart));
    await form.getByLabel("Port range end").fill(String(portStart + 49));
    await form.getByRole("button", { name: "Create group" }).click();
    await page.getByRole("heading", { name: group, exact: true }).waitFor();
    await page.getByRole("tab", { name: "Instances" }).click();
    let navigations = 0;
    page.on("framenavigated", (frame) => frame === page.mainFrame() && navigations++);
    const loadsBefore = await page.evaluate(() => (globalThis as any).performance.getEntriesByType("navigation").length as number);
    await until("two RUNNING instances on the group page", async () => {
      const rows = await rowTexts(page, `Instances of ${group}`);
      return rows.length === 2 && rows.every((r) => r.includes("RUNNING"));
    });
    assert.equal(navigations, 0, "no page load: the states came over the event stream");
    assert.equal(await page.evaluate(() => (globalThis as any).performance.getEntriesByType("navigation").length as number), loadsBefore);
  });

  step("opens a console, sends a command and sees its output", async () => {
    await page.locator(`table[aria-label="Instances of ${group}"] tbody tr a`).first().click();
    await page.getByRole("log").waitFor();
    await page.getByText("Console connected").waitFor();
    await page.getByLabel("Command").fill("say hello-from-the-dashboard");
    await page.getByLabel("Command").press("Enter");
    await page.getByRole("log").getByText("[Server] hello-from-the-dashboard").waitFor();
  });

  step("sees a crash appear with its reason", async () => {
    const id = (await page.locator("h1").textContent())!;
    await page.getByLabel("Command").fill("oom");
    await page.getByLabel("Command").press("Enter");
    await page.locator('[data-instance-state="CRASHED"]').waitFor({ timeout: waitMs });
    const crash = page.locator("[data-crash]").first();
    await crash.waitFor({ timeout: waitMs });
    assert.match((await crash.textContent())!, /OUT_OF_MEMORY/);
    assert.match((await crash.textContent())!, /OutOfMemoryError/);
    await nav(page, "Crashes");
    await page.locator("[data-crash]", { hasText: id }).getByText("OUT_OF_MEMORY").waitFor();
  });

  step("runs a rolling deployment and watches it complete", async () => {
    // The crashed instance is replaced first: two RUNNING again.
    await eventually(
      async () => ((await api(c, "GET", `/api/v1/services?group=${group}&state=RUNNING`)).json as unknown[]).length === 2,
      "two RUNNING before the rollout",
      waitMs,
    );
    await page.goto(`${c.url}/ui/#/deployments/${group}`);
    await page.getByRole("button", { name: "Start deployment" }).click();
    const form = page.getByRole("form", { name: "Start deployment" });
    await form.getByLabel("Memory (MB)").fill("160");
    await form.getByLabel("Healthy for (s)").fill("1");
    await form.getByRole("button", { name: "Start deployment" }).click();
    await page.locator("[data-deployment-state]").waitFor();
    await page.locator('[data-deployment-state="COMPLETED"]').waitFor({ timeout: 180_000 });
    const rows = page.locator('table[aria-label="Instances of the rollout"] tbody tr', { hasText: "NEW" });
    assert.ok((await rows.count()) >= 2, "the new instances are listed with their health gate");
  });

  step("edits a template file and rolls it back", async () => {
    await nav(page, "Templates");
    await page.getByRole("button", { name: "Create template" }).click();
    await page.getByLabel("Name").fill("web");
    await page.getByRole("button", { name: "Create", exact: true }).click();
    await page.getByRole("heading", { name: "web", exact: true }).waitFor();
    await page.getByRole("button", { name: "New file" }).click();
    const ask = page.getByRole("form", { name: "New file" });
    await ask.getByLabel("File name").fill("server.properties");
    await ask.getByRole("button", { name: "Create" }).click();
    const editor = page.getByLabel("Content of server.properties");
    await editor.fill("motd=first");
    await page.getByRole("button", { name: "Save" }).click();
    await page.getByText("server.properties saved").waitFor();
    await editor.fill("motd=second");
    await page.getByRole("button", { name: "Save" }).click();
    await eventually(async () => {
      const versions = (await api(c, "GET", "/api/v1/templates/web/versions")).json as { hash: string }[];
      return versions.length >= 3;
    }, "three versions of web");
    await page.getByRole("button", { name: "Close" }).click();
    await page.getByRole("tab", { name: "Versions" }).click();
    const versions = page.locator('table[aria-label="Versions"] tbody tr');
    await until("the versions", async () => (await versions.count()) >= 3);
    // Newest first: the current one (second), then the first save.
    await versions.nth(1).getByRole("button", { name: "Roll back" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Roll back" }).click();
    await page.getByText(/Rolled back to/).waitFor();
    await page.getByRole("tab", { name: "Files" }).click();
    await page.getByRole("link", { name: "server.properties" }).click();
    await until("the rolled-back content", async () => (await page.getByLabel("Content of server.properties").inputValue()) === "motd=first");
    const file = (await api(c, "GET", "/api/v1/templates/web/files/content?path=server.properties")).json as { content: string };
    assert.equal(file.content, "motd=first");
    await page.getByRole("button", { name: "Close" }).click();
    await page.getByRole("tab", { name: "Search" }).click();
    const search = page.getByRole("search", { name: "Search the template" });
    await search.getByLabel("Text or path").fill("MOTD=");
    await search.getByRole("button", { name: "Search" }).click();
    const hit = page.locator('table[aria-label="Search results"] tbody tr');
    await hit.first().waitFor();
    assert.deepEqual(
      (await hit.allTextContents()).map((t) => t.replace(/\s+/g, " ")),
      ["server.properties1motd=first"],
    );
  });

  step("creates a role and a user holding it", async () => {
    await nav(page, "Roles");
    await page.getByRole("button", { name: "Create role" }).click();
    const roleForm = page.getByRole("form", { name: "Create role" });
    await roleForm.getByLabel("Name").fill("watchers");
    await roleForm.getByLabel("Description").fill("read groups");
    await roleForm.getByRole("checkbox", { name: "groups.view" }).check();
    await roleForm.getByRole("button", { name: "Create role" }).click();
    await page.locator('table[aria-label="Roles"] tbody tr[data-key="watchers"]').waitFor();
    await nav(page, "Users");
    await page.getByRole("button", { name: "Create user" }).click();
    const userForm = page.getByRole("form", { name: "Create user" });
    await userForm.getByLabel("Username").fill("ops");
    await userForm.locator('input[name="password"]').fill("ops-password-1");
    await userForm.locator('input[name="repeat"]').fill("ops-password-1");
    await userForm.getByRole("checkbox", { name: "VIEWER" }).uncheck();
    await userForm.getByRole("checkbox", { name: "watchers" }).check();
    await userForm.getByRole("button", { name: "Create user" }).click();
    await page.locator('table[aria-label="Users"] tbody tr[data-key="ops"]', { hasText: "watchers" }).waitFor();
    const role = (await api(c, "GET", "/api/v1/roles/watchers")).json as { permissions: string[] };
    assert.deepEqual(role.permissions, ["groups.view"]);
    const user = (await api(c, "GET", "/api/v1/users/ops")).json as { roles: string[] };
    assert.deepEqual(user.roles, ["watchers"]);
  });

  step("creates a backup, uploads a bundle and dry-runs its restore", async () => {
    await nav(page, "Backups");
    await page.getByRole("button", { name: "Create backup" }).click();
    const rows = page.locator('table[aria-label="Backups"] tbody tr');
    await rows.first().waitFor({ timeout: waitMs });
    const id = (await rows.first().getAttribute("data-key"))!;
    const bundle = await fetch(`${c.url}/api/v1/backups/${encodeURIComponent(id)}/download`, { headers: { authorization: `Bearer ${c.adminToken}` } });
    assert.equal(bundle.status, 200);
    const bytes = Buffer.from(await bundle.arrayBuffer());
    // Deleted here, then uploaded back: the same bundle, authenticated by this cluster.
    await rows.first().getByRole("button", { name: "Delete" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Delete" }).click();
    await page.getByText("No backup yet.").waitFor();
    await page.locator('input[type="file"][name="bundle"]').setInputFiles({ name: "copy.tar.gz", mimeType: "application/gzip", buffer: bytes });
    const uploaded = page.locator(`table[aria-label="Backups"] tbody tr[data-key="${id}"]`);
    await uploaded.waitFor({ timeout: waitMs });
    assert.equal(await uploaded.getByText("foreign").count(), 0, "this cluster's own bundle is not foreign");
    await uploaded.getByRole("button", { name: "Restore" }).click();
    const restore = page.getByRole("form", { name: "Restore" });
    await restore.getByRole("button", { name: "Dry run" }).click();
    await restore.getByText("Dry run: nothing was changed").waitFor({ timeout: waitMs });
    assert.equal(await restore.getByRole("button", { name: "Restore" }).isDisabled(), true, "not before the id is typed");
    await page.keyboard.press("Escape");
  });

  step("drains a node", async () => {
    await nav(page, "Nodes");
    await page.getByRole("button", { name: "Drain" }).click();
    await page.locator('[data-node-state="DRAINING"]').waitFor();
    const nodes = (await api(c, "GET", "/api/v1/nodes")).json as { state: string }[];
    assert.equal(nodes[0].state, "DRAINING");
  });

  step("shows a VIEWER no button that writes (and the API refuses anyway)", async () => {
    assert.equal((await api(c, "POST", "/api/v1/users", { username: "watcher", password: "watcher-password-1", roles: ["VIEWER"] })).status, 201);
    const viewer = await browser.newPage();
    const viewerErrors = collectErrors(viewer);
    await signIn(viewer, `${c.url}/ui/`, "watcher", "watcher-password-1");
    const instance = ((await api(c, "GET", `/api/v1/services?group=${group}`)).json as { id: string }[])[0].id;
    const revision = ((await api(c, "GET", `/api/v1/groups/${group}/deployments`)).json as { revision: number }[])[0].revision;
    const writes =
      /^(Create|Edit|Scale|Maintenance|Start|Resume|Delete|Stop|Force-stop|Drain|Undrain|Cordon|Uncordon|Revoke|Lift|Import|New|Roll back|Transfer|Restore|Dry-run|Rotate|Eject|Recover|Save|Send|Pause|Promote|Share|Upload|Rename|Extract|Add)/;
    for (const route of [
      "overview",
      "groups",
      `groups/${group}`,
      "instances",
      `instances/${instance}`,
      "crashes",
      "nodes",
      "templates",
      "templates/web",
      "templates/web?tab=versions",
      "templates/web?tab=variables",
      `deployments/${group}`,
      `deployments/${group}/${revision}`,
      "players",
      "backups",
      "cluster",
    ]) {
      await viewer.goto(`${c.url}/ui/#/${route}`);
      await viewer.locator("main h1").first().waitFor();
      await viewer.waitForTimeout(300);
      const labels = await viewer.locator("main button, dialog button").allTextContents();
      const offending = labels.map((l) => l.trim()).filter((l) => writes.test(l));
      assert.deepEqual(offending, [], `${route}: ${labels.join(" | ")}`);
    }
    assert.equal(await viewer.getByLabel("Command").count(), 0, "no console input");
    const offered = await viewer.locator("nav#nav a").allTextContents();
    for (const hidden of ["Logs", "Audit", "Diagnostics"]) assert.ok(!offered.includes(hidden), `${hidden} is not offered to a VIEWER`);
    const token = await viewer.evaluate(
      () => (Object.entries((globalThis as any).sessionStorage) as [string, string][]).find(([k]) => k.startsWith("cloud.dashboard.token:"))?.[1] ?? "",
    );
    const refused = await fetch(`${c.url}/api/v1/groups/${group}`, { method: "DELETE", headers: { authorization: `Bearer ${token}` } });
    assert.equal(refused.status, 403);
    assert.deepEqual(
      viewerErrors.filter((e) => !/Failed to load resource/.test(e)),
      [],
    );
    await viewer.close();
  });

  it("logged no error in the page (no script error, no CSP refusal)", () => {
    assert.ok(!failed || errors.length >= 0);
    assert.deepEqual(
      errors.filter((e) => !/Failed to load resource/.test(e)),
      [],
    );
  });
});

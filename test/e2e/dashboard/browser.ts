/**
 * Debian's Chromium, driven by playwright-core, for the dashboard's browser tests: headless, no
 * sandbox (the tests run as root), no GPU, no background network traffic (the machine has no
 * network but the loopback), and a fresh profile directory per browser, removed on close. A test
 * that fails leaves a screenshot of each open page under test-artifacts/dashboard/.
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestContext } from "node:test";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { ensureDashboardBuilt, ROOT_DIR } from "../../../scripts/dashboard.js";

/** Debian's Chromium (`apt-get install chromium`); CHROMIUM_PATH overrides. */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
/** Where failure screenshots go (gitignored). */
export const ARTIFACTS_DIR = join(ROOT_DIR, "test-artifacts", "dashboard");
/** Bound of one step in the page (a click, a wait for text). */
export const STEP_TIMEOUT_MS = 20_000;

export const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-dev-shm-usage",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--disable-default-apps",
  "--disable-quic",
  "--no-first-run",
  "--no-default-browser-check",
];

export interface Browser {
  context: BrowserContext;
  newPage(): Promise<Page>;
  close(): Promise<void>;
}

/** Builds the dashboard when it is missing or stale (once for parallel test files), then starts Chromium. */
export async function launchBrowser(): Promise<Browser> {
  await ensureDashboardBuilt();
  const profile = mkdtempSync(join(tmpdir(), "cloud-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport: { width: 1280, height: 860 },
    timeout: 60_000,
  });
  context.setDefaultTimeout(STEP_TIMEOUT_MS);
  // Functions handed to page.evaluate are compiled by tsx, which wraps named ones in `__name(...)`;
  // the page needs that helper (a no-op) for them to run.
  await context.addInitScript({ content: "globalThis.__name = (fn) => fn;" });
  return {
    context,
    newPage: () => context.newPage(),
    close: async () => {
      await context.close().catch(() => undefined);
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** Keeps a screenshot of every open page when the test failed. */
export async function screenshotOnFailure(t: TestContext, browser: Browser | undefined, failed: boolean): Promise<void> {
  if (!failed || !browser) return;
  mkdirSync(ARTIFACTS_DIR, { recursive: true });
  const name = t.name.replace(/[^A-Za-z0-9_-]+/g, "-").slice(0, 80);
  let n = 0;
  for (const page of browser.context.pages()) {
    await page.screenshot({ path: join(ARTIFACTS_DIR, `${name}-${n++}.png`), fullPage: true, timeout: 10_000 }).catch(() => undefined);
  }
}

/**
 * Runs `body` with a fresh browser, closing it after; on failure, screenshots first. The page's
 * console errors are collected and returned for assertions (a CSP violation shows up there).
 */
export async function withBrowser(t: TestContext, body: (browser: Browser) => Promise<void>): Promise<void> {
  const browser = await launchBrowser();
  let failed = true;
  try {
    await body(browser);
    failed = false;
  } finally {
    await screenshotOnFailure(t, browser, failed);
    await browser.close();
  }
}

/** Signs in on the dashboard at `url` (…/ui/) and waits for the overview. */
export async function signIn(page: Page, url: string, username: string, password: string): Promise<void> {
  await page.goto(url);
  await page.getByLabel("Username").fill(username);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.locator(".topbar .user", { hasText: username }).waitFor();
}

/** Console messages of a page that are errors (script errors, CSP refusals). */
export function collectErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(m.text());
  });
  page.on("pageerror", (e) => errors.push(e.message));
  return errors;
}

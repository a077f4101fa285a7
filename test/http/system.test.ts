/** `GET /api/v1/system/version` and `GET /api/v1/system/ready` on a real server, and their building blocks. */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createReadinessProbe } from "../../src/http/readiness.js";
import { resolveVersionInfo } from "../../src/http/version-info.js";
import { startTestApp } from "../support/http-app.js";

describe("system version", () => {
  it("reports version, commit and the runtime under both names, without credentials", async () => {
    const t = await startTestApp();
    try {
      const res = await t.request("GET", "/api/v1/system/version");
      assert.equal(res.status, 200);
      assert.deepEqual(res.json, {
        version: "0.1.0-test",
        gitCommit: "0123456789abcdef0123456789abcdef01234567",
        runtimeVersion: process.version,
        javaVersion: process.version,
      });
    } finally {
      await t.close();
    }
  });

  it("reads package.json and takes the commit from CLOUD_GIT_COMMIT, git, or says unknown", async () => {
    const root = join(import.meta.dirname, "..", "..");
    const fromGit = resolveVersionInfo({ rootDir: root, env: {} });
    assert.match(fromGit.version, /^\d+\.\d+\.\d+/);
    assert.match(fromGit.gitCommit, /^([0-9a-f]{40}|unknown)$/);
    assert.equal(resolveVersionInfo({ rootDir: root, env: { CLOUD_GIT_COMMIT: "abc1234" } }).gitCommit, "abc1234");
    const bare = await mkdtemp(join(tmpdir(), "cloud-version-"));
    try {
      await writeFile(join(bare, "package.json"), JSON.stringify({ version: "9.8.7" }));
      const info = resolveVersionInfo({ rootDir: bare, env: {} });
      assert.equal(info.version, "9.8.7");
      assert.equal(info.gitCommit, "unknown", "a directory outside any git work tree");
      assert.equal(info.runtimeVersion, process.version);
      assert.equal(resolveVersionInfo({ rootDir: join(bare, "missing"), env: {} }).version, "unknown");
    } finally {
      await rm(bare, { recursive: true, force: true });
    }
  });

  it("a built package takes the commit from its build record, never from the repository it is installed in", async () => {
    const root = join(import.meta.dirname, "..", "..");
    const dir = await mkdtemp(join(tmpdir(), "cloud-version-built-"));
    try {
      const buildInfoPath = join(dir, "build-info.json");
      await writeFile(buildInfoPath, JSON.stringify({ version: "0.1.0", gitCommit: "fedcba9876543210fedcba9876543210fedcba98" }));
      // rootDir is this repository: git would answer with its HEAD.
      assert.equal(resolveVersionInfo({ rootDir: root, env: {}, buildInfoPath }).gitCommit, "fedcba9876543210fedcba9876543210fedcba98");
      assert.equal(resolveVersionInfo({ rootDir: root, env: { CLOUD_GIT_COMMIT: "abc1234" }, buildInfoPath }).gitCommit, "abc1234");
      await writeFile(buildInfoPath, JSON.stringify({ gitCommit: "unknown" }));
      assert.equal(resolveVersionInfo({ rootDir: root, env: {}, buildInfoPath }).gitCommit, "unknown", "built outside git: still no git call");
      const fromSource = resolveVersionInfo({ rootDir: root, env: {}, buildInfoPath: join(dir, "missing.json") });
      assert.equal(fromSource.gitCommit, resolveVersionInfo({ rootDir: root, env: {} }).gitCommit, "no build record: git as before");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("system readiness", () => {
  it("answers 200 READY with the four checks when every component answers", async () => {
    const t = await startTestApp();
    try {
      const res = await t.request("GET", "/api/v1/system/ready");
      assert.equal(res.status, 200);
      assert.deepEqual(res.json, { status: "READY", checks: { stateStore: true, coordinationStore: true, scheduler: true, platformModules: true } });
    } finally {
      await t.close();
    }
  });

  it("answers 503 NOT_READY naming the failing check when the document store is gone", async () => {
    const t = await startTestApp();
    try {
      await t.documents.close();
      const res = await t.request("GET", "/api/v1/system/ready");
      assert.equal(res.status, 503);
      assert.equal(res.json.status, "NOT_READY");
      assert.deepEqual(res.json.checks, { stateStore: false, coordinationStore: true, scheduler: true, platformModules: true });
    } finally {
      await t.close().catch(() => undefined);
    }
  });

  it("fails checks that throw, answer false or hang past the timeout", async () => {
    const probe = createReadinessProbe(
      {
        stateStore: async () => undefined,
        coordinationStore: () => {
          throw new Error("down");
        },
        scheduler: () => false,
        platformModules: () => new Promise(() => undefined),
      },
      50,
    );
    assert.deepEqual(await probe.checks(), { stateStore: true, coordinationStore: false, scheduler: false, platformModules: false });
  });

  it("answers 503 when a scheduler probe fails", async () => {
    const t = await startTestApp({ readiness: { scheduler: () => false } });
    try {
      const res = await t.request("GET", "/api/v1/system/ready");
      assert.equal(res.status, 503);
      assert.equal(res.json.checks.scheduler, false);
    } finally {
      await t.close();
    }
  });
});

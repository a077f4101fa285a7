import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startInProcessController, startTestController, type InProcessTestController, type TestController } from "../support/controller.js";

const ROOT_DIR = join(import.meta.dirname, "..", "..");
/** Bound for a child that is expected to fail fast on its configuration. */
const CONFIG_FAILURE_TIMEOUT_MS = 60_000;

const authed = (token: string, init: RequestInit = {}): RequestInit => ({
  ...init,
  headers: { authorization: `Bearer ${token}`, "content-type": "application/json", ...(init.headers ?? {}) },
});

/** Runs main.ts with `yaml` as its config; resolves with exit status and output. */
function runMainWithConfig(yaml: string, env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const dir = mkdtempSync(join(tmpdir(), "cloud-main-"));
  const path = join(dir, "controller.yml");
  writeFileSync(path, yaml);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", "src/controller/main.ts", "--config", path], {
      cwd: ROOT_DIR,
      env: { ...process.env, CLOUD_KVSTORE_URI: "", CLOUD_PROFILE: "", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`main.ts did not exit within ${CONFIG_FAILURE_TIMEOUT_MS} ms\n${stdout}\n${stderr}`));
    }, CONFIG_FAILURE_TIMEOUT_MS);
    child.once("exit", (code) => {
      clearTimeout(timer);
      rmSync(dir, { recursive: true, force: true });
      resolve({ code, stdout, stderr });
    });
  });
}

describe("cloud-controller entry: configuration errors", () => {
  it("exits 78 naming a removed key, before writing anything", async () => {
    const result = await runMainWithConfig("raft:\n  bindHost: 10.0.0.1\n");
    assert.equal(result.code, 78);
    assert.match(result.stderr, /^cloud-controller: Configuration key raft\.bindHost was removed/);
    assert.equal(result.stdout, "");
  });

  it("exits 78 on production without kvstore.uri and on an unknown key", async () => {
    const [production, unknown] = await Promise.all([runMainWithConfig("runtime:\n  profile: production\n"), runMainWithConfig("http:\n  prot: 1\n")]);
    assert.equal(production.code, 78);
    assert.match(production.stderr, /runtime\.profile is production but kvstore\.uri is not set/);
    assert.equal(unknown.code, 78);
    assert.match(unknown.stderr, /Unknown configuration key http\.prot/);
  });
});

describe("controller as a child process", () => {
  let controller: TestController;
  before(async () => {
    controller = await startTestController({ metrics: { enabled: true } });
  });
  after(async () => {
    await controller?.stop();
  });

  it("serves the API on an ephemeral loopback port and logs in the admin", async () => {
    assert.match(controller.url, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.ok(controller.adminToken.length > 20);
    const res = await fetch(`${controller.url}/api/v1/groups`, authed(controller.adminToken));
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), []);
  });

  it("writes JSON log lines with exactly the spec's fields in order", () => {
    const lines = controller
      .output()
      .split("\n")
      .filter((l) => l.startsWith("{"));
    assert.ok(lines.length >= 2);
    for (const line of lines) {
      const keys = Object.keys(JSON.parse(line));
      assert.deepEqual(keys.slice(0, 5), ["timestamp", "level", "logger", "thread", "message"], line);
      assert.ok(
        keys.slice(5).every((k) => k === "mdc" || k === "exception"),
        line,
      );
    }
    assert.ok(lines.some((l) => /"message":"Controller HTTP API listening on http:\/\/127\.0\.0\.1:\d+"/.test(l)));
  });

  it("serves /metrics with the HTTP request counter", async () => {
    const res = await fetch(`${controller.url}/metrics`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("content-type"), "text/plain; version=0.0.4; charset=utf-8");
    const text = await res.text();
    assert.match(text, /^cloud_http_requests_total\{method="get",status_class="2xx"\} \d+$/m);
    assert.match(text, /^cloud_groups_total \d+$/m);
    assert.match(text, /^process_cpu_user_seconds_total /m);
  });

  it("keeps acknowledged writes across kill -9 and restart", async () => {
    const created = await fetch(
      `${controller.url}/api/v1/groups`,
      authed(controller.adminToken, { method: "POST", body: JSON.stringify({ name: "durable", platform: "paper" }) }),
    );
    assert.equal(created.status, 201, await created.text());
    await controller.kill9();
    controller = await controller.restart();
    const res = await fetch(`${controller.url}/api/v1/groups/durable`, authed(controller.adminToken));
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as { name: string }).name, "durable");
  });

  it("stops gracefully on SIGTERM", async () => {
    const second = await startTestController({}, { login: false });
    await second.stop();
    assert.match(second.output(), /"message":"Controller stopped"/);
    await assert.rejects(fetch(`${second.url}/api/v1/system/version`));
  });
});

describe("controller in process", () => {
  let controller: InProcessTestController;
  before(async () => {
    controller = await startInProcessController();
  });
  after(async () => {
    await controller?.stop();
  });

  it("wires the bus: creating a group publishes GROUP_CREATED", async () => {
    const seen: string[] = [];
    const sub = controller.controller.events.subscribe("GROUP_CREATED", (e) => {
      seen.push(e.data.groupName as string);
    });
    const res = await fetch(
      `${controller.url}/api/v1/groups`,
      authed(controller.adminToken, { method: "POST", body: JSON.stringify({ name: "lobby", platform: "paper" }) }),
    );
    assert.equal(res.status, 201, await res.text());
    await controller.controller.events.flush();
    sub.unsubscribe();
    assert.deepEqual(seen, ["lobby"]);
  });

  it("feeds the gauges from the services and answers readiness", async () => {
    const text = await controller.controller.metrics.render();
    assert.match(text, /^cloud_groups_total 1$/m);
    const ready = await fetch(`${controller.url}/api/v1/system/ready`);
    assert.equal(ready.status, 200);
    assert.equal(((await ready.json()) as { status: string }).status, "READY");
  });

  it("records the request MDC and the http thread in the ring buffer", () => {
    const login = controller.controller.logs.recent().find((r) => r.message.startsWith("Login succeeded"));
    assert.ok(login?.mdc?.requestId, "request id in MDC");
    assert.equal(login?.mdc?.httpPath, "/api/v1/auth/login");
    assert.equal(login?.thread, "http");
  });

  it("answers 404 on /metrics when metrics are disabled", async () => {
    const disabled = await startInProcessController({ metrics: { enabled: false } }, { login: false });
    try {
      const res = await fetch(`${disabled.url}/metrics`);
      assert.equal(res.status, 404);
      assert.equal(await disabled.controller.metrics.render(), "");
    } finally {
      await disabled.stop();
    }
    await disabled.controller.stop(); // idempotent
    await assert.rejects(fetch(`${disabled.url}/metrics`), "the port is closed after stop()");
  });
});

// cloudctl logs, diagnostics bundle and crash info --share against the real HTTP app (sharing to a
// real PrivateBin-speaking server): filters, the daemon mirror of a node, --follow, --share and its
// refusal with --follow, the tar.gz entries with and without logs.txt.
import assert from "node:assert/strict";
import { createReadStream } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { createGunzip } from "node:zlib";
import { after, before, describe, test } from "node:test";
import tarStream from "tar-stream";
import { clampLogRecord } from "../../src/wire/log-records.js";
import { startTestApp, type TestApp } from "../support/http-app.js";
import { startPrivateBinServer, type PrivateBinServer } from "../support/privatebin-server.js";
import { eventually } from "../support/wait.js";
import { homeWithContext, runCli, spawnCli, waitForExit } from "./harness.js";

async function readTarGz(file: string): Promise<Map<string, string>> {
  const entries = new Map<string, string>();
  const extract = tarStream.extract();
  extract.on("entry", (header, stream, next) => {
    const chunks: Buffer[] = [];
    stream.on("data", (c: unknown) => chunks.push(c as Buffer));
    stream.on("end", () => {
      entries.set(header.name, Buffer.concat(chunks).toString("utf8"));
      next();
    });
  });
  await pipeline(createReadStream(file), createGunzip(), extract);
  return entries;
}

describe("cloudctl logs and diagnostics", () => {
  let t: TestApp;
  let paste: PrivateBinServer;
  let home: string;
  let dispose: () => void;
  let dir: string;

  before(async () => {
    paste = await startPrivateBinServer();
    t = await startTestApp({ config: { share: { enabled: true, serviceUrl: paste.url } } });
    ({ home, dispose } = homeWithContext(t.baseUrl, await t.tokenFor("ADMIN")));
    dir = await mkdtemp(join(tmpdir(), "cloud-cli-logs-"));
    const log = t.logs.logger("test.cli.logs");
    log.info("cli probe info");
    log.warn("cli probe warn");
    t.logs.logger("test.cli.other").info("cli other logger");
    await t.nodes.upsert("node-cli", { host: "10.0.0.4" });
    for (const [seq, level, message] of [
      [1, "INFO", "daemon hello"],
      [2, "DEBUG", "daemon detail"],
    ] as const) {
      t.logsAndSharing.onLogRecord(
        "node-cli",
        clampLogRecord({ level, logger: "cloud.daemon", message, timestamp_ms: Date.now(), seq, thread: "main", throwable: "", mdc: {}, dropped_before: 0 }),
      );
    }
  });
  after(async () => {
    dispose?.();
    await t?.close();
    await paste?.close();
    await rm(dir, { recursive: true, force: true });
  });

  test("logs prints the controller's records as lines, filtered by level, logger and tail", async () => {
    const [all, logger, tail, json] = await Promise.all([
      runCli(["logs"], { home }),
      runCli(["logs", "controller", "--logger", "test.cli.logs", "--level", "warn"], { home }),
      runCli(["logs", "--logger", "test.cli", "--tail", "1"], { home }),
      runCli(["logs", "--json", "--logger", "test.cli.logs"], { home }),
    ]);
    assert.equal(all.code, 0, all.stderr);
    assert.match(all.stdout, /\[main\] INFO {2}logs - cli probe info/);
    assert.match(all.stdout, /WARN {2}logs - cli probe warn/);
    assert.equal(logger.code, 0, logger.stderr);
    assert.deepEqual(
      logger.stdout
        .trim()
        .split("\n")
        .map((l) => l.replace(/^.* - /, "")),
      ["cli probe warn"],
    );
    assert.deepEqual(
      tail.stdout
        .trim()
        .split("\n")
        .map((l) => l.replace(/^.* - /, "")),
      ["cli other logger"],
    );
    assert.equal(JSON.parse(json.stdout).records.length, 2);
  });

  test("logs daemon <node-id> prints the node's mirrored records; an unknown node exits 4", async () => {
    const [info, debug, unknown, missing] = await Promise.all([
      runCli(["logs", "daemon", "node-cli"], { home }),
      runCli(["logs", "daemon", "node-cli", "--level", "DEBUG"], { home }),
      runCli(["logs", "daemon", "no-such-node"], { home }),
      runCli(["logs", "daemon"], { home }),
    ]);
    assert.equal(info.code, 0, info.stderr);
    assert.match(info.stdout, /daemon - daemon hello/);
    assert.doesNotMatch(info.stdout, /daemon detail/);
    assert.match(debug.stdout, /daemon - daemon detail/);
    assert.equal(unknown.code, 4, unknown.stderr);
    assert.equal(missing.code, 1);
  });

  test("logs --follow replays, then prints new records as they come", async () => {
    const child = spawnCli(["logs", "--follow", "--logger", "test.cli.follow"], { home });
    const exited = waitForExit(child);
    let stdout = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    try {
      t.logs.logger("test.cli.follow").info("before the follow");
      await eventually(() => t.logsAndSharing.hub.clientCount === 1, "the CLI streaming");
      t.logs.logger("test.cli.follow").info("while following");
      await eventually(
        () => stdout.includes("while following"),
        () => `follow output: ${stdout}`,
      );
      assert.ok(stdout.indexOf("before the follow") < stdout.indexOf("while following"), stdout);
    } finally {
      child.kill("SIGINT");
      await exited;
    }
  });

  test("logs --share uploads and prints the link; with --follow it is refused", async () => {
    const shared = await runCli(["logs", "--share", "--public", "--logger", "test.cli.logs", "--expiry", "1h"], { home });
    assert.equal(shared.code, 0, shared.stderr);
    const url = shared.stdout.trim().split("\n")[0]!;
    assert.match(paste.open(url), /cli probe warn/);
    const refused = await runCli(["logs", "--share", "--follow"], { home });
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /--share cannot be combined with --follow/);
    const badExpiry = await runCli(["logs", "--share", "--expiry", "2d"], { home });
    assert.equal(badExpiry.code, 1);
  });

  test("crash info --share prints the link and the password of a private share", async () => {
    const crash = await t.crashes.record({
      instanceId: "pvp-2",
      group: "pvp",
      nodeId: "n1",
      exitCode: 137,
      classification: "OOM",
      logTail: ["killed"],
      uptimeMs: 5,
    });
    const result = await runCli(["crash", "info", crash.id, "--share", "--burn-after-read"], { home });
    assert.equal(result.code, 0, result.stderr);
    const [url, passwordLine] = result.stdout.trim().split("\n");
    const password = passwordLine!.replace(/^password: /, "");
    assert.match(paste.open(url!, password), /"classification": "OOM"/);
    assert.equal([...paste.pastes.values()].at(-1)!.adata[3], 1, "burn after read");
  });

  test("diagnostics bundle writes the tar.gz with the spec's entries; --log-lines 0 leaves logs.txt out", async () => {
    const file = join(dir, "bundle.tar.gz");
    const result = await runCli(["diagnostics", "bundle", "--out", file, "--log-lines", "50"], { home });
    assert.equal(result.code, 0, result.stderr);
    const entries = await readTarGz(file);
    // The spec's entries first, then what a support case needs next: nodes, groups, crashes, each node's daemon log.
    const keys = [...entries.keys()];
    assert.deepEqual(keys.slice(0, 8), [
      "manifest.json",
      "readiness.json",
      "overview.json",
      "settings.json",
      "config.json",
      "redis.json",
      "leases.json",
      "logs.txt",
    ]);
    assert.deepEqual(keys.slice(8, 11), ["nodes.json", "groups.json", "crashes.json"]);
    assert.ok(Array.isArray(JSON.parse(entries.get("nodes.json")!)), "nodes.json is the node list");
    for (const key of keys.slice(11)) assert.match(key, /^daemon-logs\/.+\.txt$/);
    const again = await runCli(["diagnostics", "bundle", "--out", file, "--log-lines", "0"], { home });
    assert.equal(again.code, 1, "an existing file is not overwritten");
    assert.match(again.stderr, /already exists.*--force/);
    assert.equal((await runCli(["diagnostics", "bundle", "--out", file, "--log-lines", "0", "--force"], { home })).code, 0);
    assert.equal(JSON.parse(entries.get("readiness.json")!).status, "READY");
    assert.equal(JSON.parse(entries.get("config.json")!).share.enabled, true);
    assert.match(entries.get("logs.txt")!, /cli probe warn/);
    assert.ok(entries.get("logs.txt")!.trim().split("\n").length <= 50);

    const noLogs = join(dir, "no-logs.tar.gz");
    const second = await runCli(["diag", "bundle", "-o", noLogs, "--log-lines", "0"], { home });
    assert.equal(second.code, 0, second.stderr);
    const without = await readTarGz(noLogs);
    assert.ok(!without.has("logs.txt"));
    assert.deepEqual(JSON.parse(without.get("manifest.json")!).entries, [...without.keys()]);
  });
});

// Pure parts of cloudctl tested in process: backoff, retry policy, config normalization, formatters, SSE parsing, the console's events and line editor.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { normalizeConfig, parseConfigText, parseOwnFormat, resolveTarget, stringifyConfig, type CliConfig } from "../../src/cli/config-file.js";
import { parse as parseYaml } from "yaml";
import { ConsoleInput, consoleText, inputLineBytesMax, interpretConsoleEvent, refusalError, SseParser } from "../../src/cli/console-session.js";
import { filterAndSortGroups, issueText, maintenanceValue } from "../../src/cli/commands/group.js";
import { previousVersion } from "../../src/cli/commands/template.js";
import { ApiRequestError, backoffDelayMs, ConnectionError, HttpClient, redactUrl } from "../../src/cli/http-client.js";
import { sinceToIso } from "../../src/cli/options.js";
import { formatBytes, groupStatus, shortHash } from "../../src/cli/render.js";

/** A fetch that answers from a script of statuses (or throws for "refused") and records the calls. */
function scriptedFetch(script: (number | "refused")[]) {
  const calls: string[] = [];
  const fetchFn = (async (url: string | URL | Request, init?: RequestInit) => {
    calls.push(`${init?.method} ${String(url)}`);
    const next = script.shift() ?? 200;
    if (next === "refused") throw new TypeError("fetch failed", { cause: { code: "ECONNREFUSED" } });
    return new Response(next === 204 ? null : JSON.stringify(next < 400 ? { ok: true } : { error: { code: "E", message: `status ${next}`, status: next } }), {
      status: next,
    });
  }) as typeof fetch;
  return { calls, fetchFn };
}

function client(script: (number | "refused")[]) {
  const { calls, fetchFn } = scriptedFetch(script);
  const sleeps: number[] = [];
  const http = new HttpClient({ baseUrl: "http://controller.test", token: "t", fetch: fetchFn, sleep: async (ms) => void sleeps.push(ms), random: () => 0.5 });
  return { http, calls, sleeps };
}

describe("retry policy", () => {
  test("backoff: 200 ms base doubling, ±20 % jitter, 2 s cap", () => {
    assert.equal(
      backoffDelayMs(1, () => 0.5),
      200,
    );
    assert.equal(
      backoffDelayMs(2, () => 0.5),
      400,
    );
    assert.equal(
      backoffDelayMs(1, () => 0),
      160,
    );
    assert.equal(
      backoffDelayMs(1, () => 0.999999),
      240,
    );
    assert.equal(
      backoffDelayMs(5, () => 0.5),
      2000,
    );
    assert.equal(
      backoffDelayMs(30, () => 0.999999),
      2000,
      "the cap holds after jitter",
    );
  });

  test("GET is retried on 5xx, 408, 429 and connection errors, 3 attempts in total", async () => {
    for (const status of [503, 500, 408, 429, "refused"] as const) {
      const { http, calls, sleeps } = client([status, status, 200]);
      const response = await http.get("/api/v1/groups");
      assert.equal(response.status, 200);
      assert.equal(calls.length, 3, `status ${status}`);
      assert.deepEqual(sleeps, [200, 400]);
    }
    const { http, calls } = client([503, 503, 503, 200]);
    await assert.rejects(http.get("/x"), (e: ApiRequestError) => e.status === 503 && e.exitCode === 1);
    assert.equal(calls.length, 3);
    const refused = client(["refused", "refused", "refused"]);
    await assert.rejects(refused.http.get("/x"), (e: ConnectionError) => e instanceof ConnectionError && e.exitCode === 5);
  });

  test("POST, PATCH and DELETE are never retried; 4xx are never retried", async () => {
    for (const method of ["POST", "PATCH", "DELETE"]) {
      const { http, calls } = client([503, 200]);
      await assert.rejects(http.request(method, "/x", { body: {} }));
      assert.equal(calls.length, 1, method);
    }
    const refused = client(["refused", 200]);
    await assert.rejects(refused.http.post("/x"), ConnectionError);
    assert.equal(refused.calls.length, 1);
    for (const [status, exitCode] of [
      [400, 1],
      [401, 2],
      [403, 3],
      [404, 4],
      [409, 1],
      [422, 1],
    ]) {
      const { http, calls } = client([status, 200]);
      await assert.rejects(http.get("/x"), (e: ApiRequestError) => e.exitCode === exitCode && e.code === "E");
      assert.equal(calls.length, 1);
    }
  });

  test("secret query values are redacted", () => {
    assert.equal(redactUrl("http://c/api/v1/services/a/console?ticket=abc&x=1"), "http://c/api/v1/services/a/console?ticket=<redacted>&x=1");
  });
});

describe("configuration", () => {
  test("a legacy flat document becomes the default context and is made current", () => {
    const { config, migrated } = normalizeConfig({ controller: "http://a:8080", token: "t" });
    assert.equal(migrated, true);
    assert.deepEqual(config, { contexts: { default: { controller: "http://a:8080", token: "t" } }, accent: "purple", currentContext: "default" });
    assert.equal(normalizeConfig({ contexts: { x: { controller: "http://x" } }, currentContext: "x", accent: "amber" }).migrated, false);
    assert.equal(normalizeConfig({ accent: "pink" }).config.accent, "purple", "unknown accents fall back to purple");
  });

  test("the written file is YAML the fast reader and the YAML library read alike", () => {
    const config: CliConfig = {
      currentContext: 'prod "eu"',
      accent: "cyan",
      contexts: { 'prod "eu"': { controller: "http://a:8080", token: "t:#x\n" }, constructor: { controller: "http://c" }, ünï: { controller: "http://u" } },
    };
    const text = stringifyConfig(config);
    const fast = parseOwnFormat(text);
    assert.ok(fast, text);
    assert.deepEqual(normalizeConfig(fast).config, normalizeConfig(parseYaml(text)).config);
    assert.deepEqual(normalizeConfig(fast).config.contexts['prod "eu"'], { controller: "http://a:8080", token: "t:#x\n" });
    assert.equal(Object.keys(normalizeConfig(fast).config.contexts).length, 3);
    assert.deepEqual(parseOwnFormat(stringifyConfig({ accent: "purple", contexts: {} })), { accent: "purple", contexts: {} });
    const hostile = normalizeConfig(parseOwnFormat('contexts:\n  "__proto__":\n    controller: "http://p"\n')).config;
    assert.deepEqual(Object.keys(hostile.contexts), [], "__proto__ never becomes a context");
    assert.equal(Object.getPrototypeOf(hostile.contexts), Object.prototype);
    assert.equal(parseOwnFormat("controller: http://legacy\ntoken: t\n"), undefined, "other shapes go to the YAML library");
    assert.deepEqual(parseConfigText("controller: http://legacy\ntoken: t\n"), { controller: "http://legacy", token: "t" });
  });

  test("each of context, controller and token resolves independently", () => {
    const { config } = normalizeConfig({ currentContext: "a", contexts: { a: { controller: "http://a", token: "ta" }, b: { controller: "http://b" } } });
    const r = resolveTarget(config, { context: "b" }, { CLOUD_TOKEN: "te" });
    assert.deepEqual([r.contextName, r.controller, r.token, r.tokenSource], ["b", "http://b", "te", "env"]);
    assert.equal(resolveTarget(config, { context: "ghost" }, {}).contextExists, false);
  });
});

describe("rendering and parsing", () => {
  test("sizes, hashes and derived group status", () => {
    assert.deepEqual([0, 1023, 1024, 1536, 1048575, 1048576, 5.5 * 1048576].map(formatBytes), [
      "0 B",
      "1023 B",
      "1.0 KB",
      "1.5 KB",
      "1024.0 KB",
      "1.0 MB",
      "5.5 MB",
    ]);
    assert.equal(shortHash("0123456789abcdef"), "01234567");
    assert.equal(groupStatus({ maintenance: true, runningInstances: 0, minInstances: 3 }), "DRAIN");
    assert.equal(groupStatus({ runningInstances: 0, minInstances: 1 }), "DOWN");
    assert.equal(groupStatus({ runningInstances: 0, minInstances: 0 }), "UP");
    assert.equal(groupStatus({ runningInstances: 2, minInstances: 3 }), "UP");
  });

  test("maintenance words, group filter and sort, previous template version, --since", () => {
    assert.deepEqual(["on", "ON", "true", "1", " on "].map(maintenanceValue), [true, true, true, true, true]);
    assert.deepEqual(["off", "yes", "enable", "0", ""].map(maintenanceValue), [false, false, false, false, false]);
    const groups = [
      { name: "b", totalPlayers: 1, runningInstances: 5 },
      { name: "A", totalPlayers: 9, runningInstances: 1 },
      { name: "ab", totalPlayers: 9, runningInstances: 2 },
    ];
    assert.deepEqual(
      filterAndSortGroups(groups, undefined, "name").map((g) => g.name),
      ["A", "ab", "b"],
    );
    assert.deepEqual(
      filterAndSortGroups(groups, undefined, "players").map((g) => g.name),
      ["A", "ab", "b"],
    );
    assert.deepEqual(
      filterAndSortGroups(groups, undefined, "instances").map((g) => g.name),
      ["b", "ab", "A"],
    );
    assert.deepEqual(
      filterAndSortGroups(groups, "A", "name").map((g) => g.name),
      ["A", "ab"],
    );
    assert.equal(previousVersion([{ hash: "new" }, { hash: "old" }])?.hash, "old");
    assert.equal(previousVersion([{ hash: "only" }]), undefined);
    assert.equal(sinceToIso("1h", Date.parse("2026-11-22T03:00:00Z")), "2026-11-22T02:00:00.000Z");
    assert.equal(sinceToIso("2026-11-20"), "2026-11-20T00:00:00.000Z");
    assert.throws(() => sinceToIso("yesterday-ish"));
  });

  test("SSE parsing across chunk boundaries, comments and multi-line data", () => {
    const parser = new SseParser();
    assert.deepEqual(parser.push(': hello\n\ndata: {"line":"a"}\n'), []);
    assert.deepEqual(parser.push("\ndata: one\r\ndata: two\r\n\r\nevent: ping\ndata: x\n\n"), [
      { event: "message", data: '{"line":"a"}' },
      { event: "message", data: "one\ntwo" },
      { event: "ping", data: "x" },
    ]);
    assert.equal(consoleText('{"line":"[Server] ok"}'), "[Server] ok");
    assert.equal(consoleText("plain"), "plain");
  });

  test("the controller's console frames: connected is ignored, console lines print, error refuses (Unauthorized exits 2)", () => {
    const frames = new SseParser().push(
      'event: connected\ndata: {"instanceId":"lobby-1"}\n\n' +
        'event: console\nid: 7\ndata: {"instanceId":"lobby-1","line":"[Server] hi","stream":"stdout","timestampMs":1}\n\n' +
        'event: error\ndata: {"message":"Unauthorized"}\n\n',
    );
    assert.deepEqual(
      frames.map((f) => interpretConsoleEvent(f, false)),
      [{ kind: "ignore" }, { kind: "print", text: "[Server] hi" }, { kind: "refused", message: "Unauthorized" }],
    );
    assert.deepEqual(interpretConsoleEvent(frames[1], true), { kind: "print", text: frames[1].data }, "--json prints the data as sent");
    assert.deepEqual(interpretConsoleEvent({ event: "line", data: "plain" }, false), { kind: "print", text: "plain" });
    assert.equal(refusalError("Unauthorized").exitCode, 2);
    assert.equal(refusalError("Too many connections").exitCode, 1);
  });

  test("console line editor: pipe lines, the detach key, terminal echo and UTF-8 backspace, the line bound", () => {
    const bytes = (text: string) => Buffer.from(text, "utf8");
    const pipe = new ConsoleInput(false);
    assert.deepEqual(pipe.push(bytes("say a\r\nlis")), { lines: ["say a", ""], echo: [], detach: false });
    assert.deepEqual(pipe.push(bytes("t\nstop\x11ignored\n")), { lines: ["list"], echo: [], detach: true }, "a partial line before Ctrl-Q is dropped");
    assert.equal(new ConsoleInput(false).push(bytes("\x03")).detach, false, "Ctrl-C is data on a pipe");

    const tty = new ConsoleInput(true);
    const typed = tty.push(bytes("sé\x7f\x7fay\r"));
    assert.deepEqual(typed.lines, ["ay"]);
    assert.equal(Buffer.from(typed.echo).toString("utf8"), "sé\b \b\b \bay\r\n");
    assert.equal(tty.push(bytes("\x03")).detach, true, "Ctrl-C detaches on a terminal");

    const long = new ConsoleInput(false).push(Buffer.alloc(inputLineBytesMax + 3, 0x61));
    assert.deepEqual(
      long.lines.map((l) => l.length),
      [inputLineBytesMax],
    );
  });

  test("scheduling issue text", () => {
    assert.equal(issueText(null), "");
    assert.equal(issueText({ code: "NO_CAPACITY", message: "no node has 128 MB free", since: "2026-01-01T00:00:00Z" }), "NO_CAPACITY: no node has 128 MB free");
  });
});

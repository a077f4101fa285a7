/**
 * Hostile input on a real server: bodies nested thousands of levels deep sent to every route of the
 * registry (JSON arrays and objects, as the whole body and in each of the route's fields), and names
 * and paths that are not UTF-8 in JSON bodies, URL path parameters, query values and multipart file
 * names. Each is refused with a 4xx envelope, never a 5xx, and nothing changes.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { TSchema } from "@sinclair/typebox";
import { JSON_BODY_DEPTH_MAX, jsonNestingDepth, parseJsonBody } from "../../src/http/json-body.js";
import { hasNonUtf8Escapes } from "../../src/http/middleware/utf8-url.js";
import type { RouteDef } from "../../src/http/route.js";
import { normalizeTemplatePath } from "../../src/wire/template-paths.js";
import { ApiError } from "../../src/shared/errors.js";
import { startTestApp, type TestApp } from "../support/http-app.js";

/** Levels of the hostile bodies: 5,000 nested arrays is a 10 KB body. */
const HOSTILE_DEPTH = 5_000;
const PROBE = "deep-probe";
const INSTANCE_ID = "deep-probe-1";

const deepArray = (levels: number) => "[".repeat(levels) + "]".repeat(levels);
const deepObject = (levels: number) => '{"a":'.repeat(levels) + "1" + "}".repeat(levels);

function propertyNames(schema: TSchema | undefined): string[] {
  const props = (schema as { properties?: Record<string, unknown> } | undefined)?.properties;
  return props ? Object.keys(props) : [];
}

/** The whole body deep, then each of the route's own fields deep (arrays and objects). */
function hostileBodies(def: RouteDef): string[] {
  const bodies = [deepArray(HOSTILE_DEPTH), deepObject(HOSTILE_DEPTH)];
  for (const field of propertyNames(def.body)) {
    bodies.push(`{${JSON.stringify(field)}:${deepArray(HOSTILE_DEPTH)}}`, `{${JSON.stringify(field)}:${deepObject(HOSTILE_DEPTH)}}`);
  }
  return bodies;
}

interface RawResponse {
  status: number;
  json: any;
  text: string;
}

describe("hostile input", () => {
  let t: TestApp;
  let admin: string;
  let workload: string;

  /** A request with a body of raw bytes (or text sent as is) and a URL sent exactly as written. */
  const raw = async (
    method: string,
    path: string,
    body?: Uint8Array | string,
    headers: Record<string, string> = {},
    token: string | null = admin,
  ): Promise<RawResponse> => {
    const res = await fetch(t.baseUrl + path, {
      method,
      headers: { ...(body === undefined ? {} : { "content-type": "application/json" }), ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers },
      body,
    });
    const text = await res.text();
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: res.status, json, text };
  };

  /** Everything a refused request must leave as it was, read through the API. */
  const snapshot = async () => {
    const out: Record<string, unknown> = {};
    for (const path of [
      "/api/v1/groups",
      `/api/v1/groups/${PROBE}`,
      "/api/v1/services",
      `/api/v1/services/${INSTANCE_ID}`,
      "/api/v1/nodes",
      "/api/v1/admin/tokens",
      "/api/v1/users",
      "/api/v1/roles",
      "/api/v1/templates",
      `/api/v1/templates/${PROBE}/files?path=`,
      `/api/v1/templates/${PROBE}/variables`,
      "/api/v1/crashes",
      "/api/v1/audit?pageSize=500",
    ]) {
      const res = await t.request("GET", path, { token: admin });
      assert.equal(res.status, 200, `${path}: ${res.text.slice(0, 200)}`);
      out[path] = res.json;
    }
    return out;
  };

  const assertEnvelope = (res: RawResponse, status: number, code: string, what: string) => {
    assert.equal(res.status, status, `${what} -> ${res.status} ${res.text.slice(0, 200)}`);
    assert.deepEqual(Object.keys(res.json ?? {}), ["error"], what);
    assert.equal(res.json.error.code, code, what);
    assert.equal(res.json.error.status, status, what);
  };

  before(async () => {
    t = await startTestApp({ config: { rateLimit: { perIpPerMinute: 10_000_000, perUserPerMinute: 10_000_000 } } });
    admin = await t.tokenFor("ADMIN");
    await t.groups.create({ name: PROBE, platform: "paper" });
    await t.templates.create({ name: PROBE });
    await t.nodes.upsert("deep-node", { host: "10.0.0.1" });
    await t.instances.save({
      id: INSTANCE_ID,
      group: PROBE,
      node: "deep-node",
      port: 30000,
      memoryMb: 512,
      state: "STARTING",
      playerCount: 0,
      startedAt: null,
      deploymentRevision: 1,
    });
    workload = t.credentials.issueWorkloadToken({ instanceId: INSTANCE_ID, group: PROBE, node: "deep-node" }).token;
  });
  after(() => t.close());

  describe("nesting depth", () => {
    it("answers every JSON route's deeply nested bodies with 400 BAD_REQUEST, never 5xx, and changes nothing", async () => {
      const before = await snapshot();
      const problems: string[] = [];
      const jsonRoutes: string[] = [];
      // Every route that reads a JSON body; the others never parse one (the fuzz test covers them).
      for (const { def } of t.registry.routes.filter((r) => r.def.body)) {
        const method = def.method.toUpperCase();
        const token = def.auth === "public" ? null : def.auth === "workload" ? workload : admin;
        const path = def.path.replace(/:(\w+)(\{[^}]*\})?\??/g, PROBE);
        jsonRoutes.push(`${method} ${def.path}`);
        for (const body of hostileBodies(def)) {
          const res = await raw(method, path, body, {}, token);
          const cell = `${method} ${path} body=${body.slice(0, 24)}... -> ${res.status} ${res.text.slice(0, 160)}`;
          if (res.status >= 500) problems.push(`5xx: ${cell}`);
          else if (res.json?.error?.status !== res.status || typeof res.json?.error?.code !== "string") problems.push(`no envelope: ${cell}`);
          else if (!(res.status === 400 && res.json.error.code === "BAD_REQUEST")) problems.push(`want 400 BAD_REQUEST: ${cell}`);
        }
      }
      for (const route of [
        "POST /api/v1/auth/login",
        "POST /api/v1/admin/tokens",
        "PATCH /api/v1/groups/:name",
        "POST /api/plugin/player-join",
        "POST /api/v1/cluster/join-tokens",
        "PUT /api/v1/templates/:name/files/content",
      ]) {
        assert.ok(jsonRoutes.includes(route), `${route} is among the JSON routes walked: ${jsonRoutes.join(", ")}`);
      }
      assert.deepEqual(problems, []);
      assert.deepEqual(await snapshot(), before);
    });

    it("the two fields that accept several types: nodeId of a node token and routing of a group", async () => {
      const before = await snapshot();
      const token = await raw("POST", "/api/v1/admin/tokens", `{"nodeId":${deepArray(HOSTILE_DEPTH)}}`);
      assertEnvelope(token, 400, "BAD_REQUEST", "POST /api/v1/admin/tokens");
      assert.match(token.json.error.message, new RegExp(`deeper than ${JSON_BODY_DEPTH_MAX} levels`));
      const group = await raw("PATCH", `/api/v1/groups/${PROBE}`, `{"routing":${deepObject(HOSTILE_DEPTH)}}`);
      assertEnvelope(group, 400, "BAD_REQUEST", `PATCH /api/v1/groups/${PROBE}`);
      assert.deepEqual(await snapshot(), before);
    });

    it(`accepts ${JSON_BODY_DEPTH_MAX} levels (the schema decides) and refuses ${JSON_BODY_DEPTH_MAX + 1}`, async () => {
      // The enclosing object is the first level.
      const atLimit = await raw("POST", "/api/v1/admin/tokens", `{"nodeId":${deepArray(JSON_BODY_DEPTH_MAX - 1)}}`);
      assertEnvelope(atLimit, 422, "VALIDATION_ERROR", "at the limit");
      const beyond = await raw("POST", "/api/v1/admin/tokens", `{"nodeId":${deepArray(JSON_BODY_DEPTH_MAX)}}`);
      assertEnvelope(beyond, 400, "BAD_REQUEST", "beyond the limit");
      // Brackets inside strings are text, not nesting.
      const inString = await raw("PATCH", `/api/v1/groups/${PROBE}`, JSON.stringify({ routing: "[".repeat(HOSTILE_DEPTH) }));
      assertEnvelope(inString, 422, "VALIDATION_ERROR", "brackets in a string");
    });
  });

  describe("names and paths that are not UTF-8", () => {
    const mkdir = `/api/v1/templates/${PROBE}/files/mkdir`;
    const bytes = (...parts: (string | number[])[]) =>
      new Uint8Array(Buffer.concat(parts.map((p) => (typeof p === "string" ? Buffer.from(p, "utf8") : Buffer.from(p)))));
    const fileNames = async () =>
      ((await t.request("GET", `/api/v1/templates/${PROBE}/files`, { token: admin })).json.entries as { path: string }[]).map((e) => e.path).sort();

    it("refuses a JSON body with bytes that are not UTF-8 (invalid, overlong, encoded surrogate) with 400, creating nothing", async () => {
      const before = await snapshot();
      for (const bad of [
        [0xff, 0xfe],
        [0xc0, 0xaf],
        [0xed, 0xa0, 0x80],
        [0xe2, 0x82],
      ]) {
        const res = await raw("POST", mkdir, bytes('{"path":"dir-', bad, '"}'));
        assertEnvelope(res, 400, "BAD_REQUEST", `mkdir with bytes ${bad.join(",")}`);
        assert.match(res.json.error.message, /not valid UTF-8/);
        const group = await raw("POST", "/api/v1/groups", bytes('{"name":"g', bad, '","platform":"paper"}'));
        assertEnvelope(group, 400, "BAD_REQUEST", "group name");
      }
      assert.deepEqual(await snapshot(), before);
    });

    it("refuses a JSON string holding a lone surrogate escape with 400", async () => {
      const before = await snapshot();
      for (const body of ['{"path":"dir-\\ud800"}', '{"path":"dir-\\udc00x"}', '{"path":"ok","\\ud83d":1}']) {
        assertEnvelope(await raw("POST", mkdir, body), 400, "BAD_REQUEST", body);
      }
      const content = await raw("PUT", `/api/v1/templates/${PROBE}/files/content`, '{"path":"a.txt","content":"text \\udfff"}');
      assertEnvelope(content, 400, "BAD_REQUEST", "file content");
      assert.deepEqual(await snapshot(), before);
    });

    it("refuses path parameters and query values whose percent-escapes are not UTF-8 with 400", async () => {
      const made = await t.request("POST", mkdir, { token: admin, body: { path: "données" } });
      assert.equal(made.status, 200, made.text);
      const before = await snapshot();
      for (const [method, path] of [
        ["GET", "/api/v1/templates/%FF"],
        ["GET", "/api/v1/groups/lobby%C3"],
        ["DELETE", "/api/v1/groups/%ED%A0%80"],
        ["POST", "/api/v1/templates/%C3%28/files/mkdir"],
        ["GET", `/api/v1/templates/${PROBE}/files?path=%FF`],
        ["GET", `/api/v1/templates/${PROBE}/files/content?path=a%E9.txt`],
        ["DELETE", `/api/v1/templates/${PROBE}/files?path=donn%E9es`],
        ["GET", `/api/v1/audit?username=%80`],
        ["GET", `/api/v1/templates?%FF=1`],
      ] as const) {
        const res = await raw(method, path, method === "POST" ? '{"path":"x"}' : undefined);
        assertEnvelope(res, 400, "BAD_REQUEST", `${method} ${path}`);
      }
      assert.deepEqual(await snapshot(), before);
      assert.deepEqual(await fileNames(), ["données"]);
      // The same names written in UTF-8 are fine.
      const listed = await raw("GET", `/api/v1/templates/${PROBE}/files?path=donn%C3%A9es`);
      assert.equal(listed.status, 200, listed.text);
      const deleted = await raw("DELETE", `/api/v1/templates/${PROBE}/files?path=donn%C3%A9es`);
      assert.equal(deleted.status, 200, deleted.text);
      assert.deepEqual(await fileNames(), []);
    });

    it("refuses a multipart upload whose file name is not UTF-8 with 400, writing nothing; a UTF-8 name is stored", async () => {
      const boundary = "hostile-boundary";
      const part = (fileName: Uint8Array) =>
        bytes(
          `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="`,
          [...fileName],
          `"\r\nContent-Type: application/octet-stream\r\n\r\nhello\r\n--${boundary}--\r\n`,
        );
      const upload = (body: Uint8Array) =>
        raw("POST", `/api/v1/templates/${PROBE}/files/upload`, body, { "content-type": `multipart/form-data; boundary=${boundary}` });
      const before = await snapshot();
      const bad = await upload(part(bytes("caf", [0xe9], ".txt")));
      assertEnvelope(bad, 400, "BAD_REQUEST", "latin-1 file name");
      assert.match(bad.json.error.message, /file name is not valid UTF-8/);
      assertEnvelope(await upload(part(bytes("x", [0xff, 0xfe], ".txt"))), 400, "BAD_REQUEST", "0xff 0xfe file name");
      assert.deepEqual(await snapshot(), before);
      const good = await upload(part(bytes("café.txt")));
      assert.equal(good.status, 200, good.text);
      assert.deepEqual(await fileNames(), ["café.txt"]);
    });

    it("template paths refuse U+FFFD and lone surrogates (archive entries and other names decoded loosely)", () => {
      for (const path of ["dir-\ufffd", "a/\ufffd/b", "x\ud800", "\udc00"]) {
        assert.throws(
          () => normalizeTemplatePath(path, "path"),
          (err: unknown) => err instanceof ApiError && err.status === 422 && err.code === "INVALID_PATH" && /not valid UTF-8/.test(err.message),
          JSON.stringify(path),
        );
      }
      assert.equal(normalizeTemplatePath("données/😀.txt", "path"), "données/😀.txt");
    });
  });

  describe("the checks on their own", () => {
    it("counts nesting outside strings only, escaped quotes included, and stops past the limit", () => {
      assert.equal(jsonNestingDepth('{"a":[1,{"b":[]}]}', 64), 4);
      assert.equal(jsonNestingDepth('["[[[", "\\"", "\\"[[[["]', 64), 1);
      assert.equal(jsonNestingDepth('"\\\\"[[', 64), 2);
      assert.equal(jsonNestingDepth("[".repeat(1_000_000), 64), 65);
      assert.equal(jsonNestingDepth("not json {{", 64), 2);
      assert.equal(jsonNestingDepth('[["unterminated [[[', 64), 2);
      // Three backslashes: the quote is escaped and the string never ends.
      assert.equal(jsonNestingDepth('["a\\\\\\"[[[[', 64), 1);
      // Four: the quote closes the string.
      assert.equal(jsonNestingDepth('["a\\\\\\\\"[[[[', 64), 5);
    });

    it("parses a body or names what is wrong with it", () => {
      assert.deepEqual(parseJsonBody(new Uint8Array(0)), {});
      assert.deepEqual(parseJsonBody(new TextEncoder().encode('\ufeff{"a":"é😀"}')), { a: "é😀" });
      const refusal = (bytes: Uint8Array) => {
        try {
          parseJsonBody(bytes);
          return "accepted";
        } catch (err) {
          assert.ok(err instanceof ApiError && err.status === 400 && err.code === "BAD_REQUEST");
          return err.message;
        }
      };
      assert.match(refusal(new Uint8Array([0x7b, 0xff, 0x7d])), /not valid UTF-8/);
      assert.match(refusal(new TextEncoder().encode(deepArray(JSON_BODY_DEPTH_MAX + 1))), /deeper than 64/);
      assert.match(refusal(new TextEncoder().encode("{")), /not valid JSON/);
      assert.match(refusal(new TextEncoder().encode('["\\ud800"]')), /lone surrogate/);
      assert.match(refusal(new TextEncoder().encode('{"\\udc00":1}')), /lone surrogate/);
      assert.equal(refusal(new TextEncoder().encode('["\\ud83d\\ude00"]')), "accepted");
    });

    it("tells UTF-8 escapes from others in a URL", () => {
      for (const ok of ["/a/b?c=d", "/caf%C3%A9?q=%F0%9F%98%80", "/a%2Fb", "/100%", "/%zz?x=%", "/%25FF"]) assert.equal(hasNonUtf8Escapes(ok), false, ok);
      for (const bad of ["/%FF", "/a?q=%C3", "/%C3%28", "/%ED%A0%80", "/%C0%AF", "/x?%F0%9F%98=1", "/ok?a=%C3&b=%A9"])
        assert.equal(hasNonUtf8Escapes(bad), true, bad);
    });
  });
});

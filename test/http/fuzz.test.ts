/**
 * Property-based test (fast-check) against every registered route on a real server: malformed JSON,
 * wrong types, huge strings and odd query and path values. Whatever arrives, the answer is never a
 * 5xx, and every error is the envelope `{"error":{"code","message","status"}}`.
 *
 * Request lines stay below Node's header limit (16 KiB): longer ones are refused by the HTTP parser
 * with 431 before the application sees them. Huge values therefore go into bodies.
 * Reproduce a failure with FUZZ_SEED=<seed printed by fast-check>.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import type { TSchema } from "@sinclair/typebox";
import type { RouteDef } from "../../src/http/route.js";
import { startTestApp, type TestApp, type TestResponse } from "../support/http-app.js";

/** Runs per route; the whole file sends about routes x this many requests. */
const RUNS_PER_ROUTE = Number(process.env.FUZZ_RUNS ?? 40);
const SEED = process.env.FUZZ_SEED === undefined ? undefined : Number(process.env.FUZZ_SEED);
/** Longest generated path or query value (characters, before encoding). */
const URL_VALUE_LENGTH_MAX = 1500;
/** Longest generated string inside a body. */
const BODY_STRING_LENGTH_MAX = 300_000;

const oddTokens = fc.constantFrom(
  "",
  " ",
  "..",
  "../../etc/passwd",
  "%",
  "%00",
  "\u0000",
  "null",
  "undefined",
  "-1",
  "0",
  "1e309",
  "NaN",
  "Infinity",
  "true",
  "[]",
  "{}",
  "__proto__",
  "constructor",
  "'; DROP TABLE users; --",
  "<script>alert(1)</script>",
  "\u202e\u0301\ud83d\ude00",
  "000000000000000000000000",
  "ffffffffffffffffffffffff",
);

const urlValue = fc.oneof(
  oddTokens,
  fc.string({ maxLength: 40 }),
  fc.string({ unit: "grapheme", maxLength: 40 }),
  fc.string({ unit: "binary", maxLength: 40 }),
  fc.integer().map(String),
  fc.double().map(String),
  fc.integer({ min: 100, max: URL_VALUE_LENGTH_MAX }).map((n) => "a".repeat(n)),
);

const bodyString = fc.oneof(
  oddTokens,
  fc.string({ maxLength: 60 }),
  fc.string({ unit: "binary", maxLength: 60 }),
  fc.integer({ min: 1000, max: BODY_STRING_LENGTH_MAX }).map((n) => "z".repeat(n)),
);

const bodyValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  bodyString,
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.constantFrom(null, true, false, [], {}, -1, 0, 2 ** 53, 1e308, 65536),
);

function propertyNames(schema: TSchema | undefined): string[] {
  const props = (schema as { properties?: Record<string, unknown> } | undefined)?.properties;
  return props ? Object.keys(props) : [];
}

/** Raw body text: malformed JSON, JSON of the wrong shape, or the route's own keys with wrong values. */
function bodyText(def: RouteDef): fc.Arbitrary<string | undefined> {
  const keys = [...propertyNames(def.body), "extra", "__proto__"];
  return fc.oneof(
    fc.constant(undefined),
    fc.string({ maxLength: 80 }),
    fc.constantFrom("{", "}", "[", '{"a":', "nul", '{"__proto__":{"admin":true}}', '"unterminated', "{'single':1}", "\u0000"),
    fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)),
    fc.dictionary(fc.constantFrom(...keys), bodyValue, { maxKeys: keys.length }).map((o) => JSON.stringify(o)),
  );
}

/** A path with each `:param` replaced by a generated value, percent-encoded or raw. */
function pathFor(def: RouteDef): fc.Arbitrary<string> {
  const names = [...def.path.matchAll(/:(\w+)/g)].map((m) => m[1]);
  const segment = fc.oneof(
    { weight: 5, arbitrary: urlValue.map((v) => encodeURIComponent(v) || "x") },
    { weight: 1, arbitrary: fc.constantFrom("%E0%A4%A", "%", "%zz", "..%2F..", "a%2Fb", "%00", ".", "..") },
  );
  return fc.tuple(...names.map(() => segment)).map((values) => {
    let i = 0;
    return def.path.replace(/:(\w+)(\{[^}]*\})?\??/g, () => values[i++]);
  });
}

function queryFor(def: RouteDef): fc.Arbitrary<string> {
  const keys = [...propertyNames(def.query), "x", "page"];
  const pairs = fc.array(fc.tuple(fc.constantFrom(...keys), urlValue), { maxLength: 4 });
  return fc.oneof(
    { weight: 5, arbitrary: pairs.map((p) => (p.length === 0 ? "" : `?${new URLSearchParams(p).toString()}`)) },
    { weight: 1, arbitrary: fc.constantFrom("?%zz=%", "?&&&", "?=", "?a[b]=c", "?pageSize=1&pageSize=2", "?cursor", "?cursor=%E0%A4%A") },
  );
}

function checkResponse(res: TestResponse, what: string): void {
  assert.ok(res.status < 500, `${what} -> ${res.status} ${res.text.slice(0, 300)}`);
  if (res.status >= 400) {
    const error = res.json?.error;
    assert.ok(error && typeof error === "object", `${what} -> ${res.status} without envelope: ${res.text.slice(0, 300)}`);
    assert.equal(typeof error.code, "string", what);
    assert.equal(typeof error.message, "string", what);
    assert.equal(error.status, res.status, what);
    assert.deepEqual(Object.keys(res.json), ["error"], what);
  }
}

describe("fuzzing every route", () => {
  let t: TestApp;
  let admin: string;
  before(async () => {
    t = await startTestApp({ config: { rateLimit: { perIpPerMinute: 10_000_000, perUserPerMinute: 10_000_000 } } });
    await t.auth.users.create({ username: "fuzz-admin", password: "fuzz-admin-password", roles: ["ADMIN"] });
    admin = await t.login("fuzz-admin", "fuzz-admin-password");
  });
  after(() => t.close());

  it("never answers 5xx and always renders errors as the envelope", async () => {
    for (const { def } of [...t.registry.routes]) {
      const method = def.method.toUpperCase();
      await fc.assert(
        fc.asyncProperty(pathFor(def), queryFor(def), bodyText(def), fc.boolean(), async (path, query, body, anonymous) => {
          const res = await t.request(method, path + query, {
            token: anonymous ? null : admin,
            rawBody: method === "GET" ? undefined : body,
          });
          checkResponse(res, `${method} ${path}${query.slice(0, 200)} body=${String(body).slice(0, 200)}`);
        }),
        { numRuns: RUNS_PER_ROUTE, seed: SEED, endOnFailure: true },
      );
    }
  });

  it("refuses bodies above the limit with 413 on every route that takes one", async () => {
    const huge = JSON.stringify({ value: "h".repeat(1024 * 1024 + 1) });
    for (const { def } of t.registry.routes.filter((r) => r.def.body)) {
      const path = def.path.replace(/:(\w+)/g, "fuzz");
      const res = await t.request(def.method.toUpperCase(), path, { token: admin, rawBody: huge });
      checkResponse(res, `${def.method} ${path}`);
      assert.equal(res.status, 413, `${def.method} ${path}`);
    }
  });
});

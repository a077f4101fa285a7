// The module SDK's REST objects and route rules (spec document 3, "Module REST API objects" and
// "Module-mounted routes" rules 1 to 6, "Errors"), run as the worker runs them.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  findModuleRoute,
  InvalidArgumentError,
  moduleRequest,
  ModuleResponseRecorder,
  ModuleRouteTable,
  NotFoundError,
  parseRouteTemplate,
  pathSegmentsOf,
  runModuleRoute,
} from "../../src/sdk/module/index.js";

const body = (value: unknown) => new TextEncoder().encode(typeof value === "string" ? value : JSON.stringify(value));

describe("module route templates", () => {
  it("normalizes a leading slash (rule 1) and refuses blank templates, ? and # (rule 2)", () => {
    assert.equal(parseRouteTemplate("/a/b").text, "a/b");
    assert.equal(parseRouteTemplate("a/b").text, "a/b");
    for (const bad of ["", "   ", "/", "a?b", "a#b"]) assert.throws(() => parseRouteTemplate(bad), { kind: "illegal-state" } as object, bad);
  });

  it("takes whole-segment parameters only, no wildcard or regex (rule 3)", () => {
    assert.deepEqual(parseRouteTemplate("players/{id}/stats").segments, [{ literal: "players" }, { param: "id" }, { literal: "stats" }]);
    for (const bad of ["players/x{id}", "players/{id", "files/*", "a/{1x}", "a/{id}/{id}"])
      assert.throws(() => parseRouteTemplate(bad), { kind: "illegal-state" } as object, bad);
  });

  it("matches equal segment counts, literals exactly, parameters decoded", () => {
    const table = new ModuleRouteTable();
    const handler = () => {};
    table.get("players/{id}", handler).get("players/top", handler).post("players/{id}", handler).get("players/{id}/stats", handler);
    assert.deepEqual(findModuleRoute(table.routes, "GET", pathSegmentsOf("players/alice%20b")!), { index: 0, params: { id: "alice b" } });
    // Rule 4: the first registered match wins, so players/top goes to the parameter route.
    assert.deepEqual(findModuleRoute(table.routes, "GET", ["players", "top"]), { index: 0, params: { id: "top" } });
    assert.equal(findModuleRoute(table.routes, "POST", ["players", "x"])?.index, 2);
    assert.equal(findModuleRoute(table.routes, "GET", ["players", "x", "stats"])?.index, 3);
    assert.equal(findModuleRoute(table.routes, "GET", ["players"]), null);
    assert.equal(findModuleRoute(table.routes, "GET", ["Players", "x"]), null);
    assert.equal(findModuleRoute(table.routes, "DELETE", ["players", "x"]), null);
    assert.equal(pathSegmentsOf("a/%E0%A4%A"), null);
  });

  it("registers typed bodies for post, put, patch and delete only; a null body type or handler fails (rule 5)", () => {
    const table = new ModuleRouteTable();
    const parse = (v: unknown) => v;
    table
      .post("a", parse, () => {})
      .put("a", parse, () => {})
      .patch("a", parse, () => {})
      .delete("a", parse, () => {});
    assert.equal(table.routes.filter((r) => r.bodyType).length, 4);
    assert.throws(() => (table.get as any)("a", parse, () => {}), { kind: "illegal-state" } as object);
    assert.throws(() => table.post("a", null as any, () => {}), { kind: "illegal-state" } as object);
    assert.throws(() => table.post("a", parse, null as any), { kind: "illegal-state" } as object);
    assert.throws(() => table.get("a", null as any), { kind: "illegal-state" } as object);
  });

  it("ignores registrations once closed", () => {
    const ignored: string[] = [];
    const table = new ModuleRouteTable((method, template) => ignored.push(`${method} ${template}`));
    table.get("a", () => {});
    table.close();
    table.get("b", () => {});
    assert.equal(table.routes.length, 1);
    assert.deepEqual(ignored, ["GET b"]);
  });
});

describe("module request and response objects", () => {
  it("exposes the request's parts; first query value only; missing path parameter throws invalid-argument", () => {
    const request = moduleRequest({
      method: "POST",
      path: "/api/v1/modules/motd/messages/1",
      pathParams: { id: "1" },
      query: { page: "2" },
      headers: { "X-User-Id": "alice", "Content-Type": "application/json" },
      body: body({ text: "hi" }),
    });
    assert.equal(request.method(), "POST");
    assert.equal(request.path(), "/api/v1/modules/motd/messages/1");
    assert.equal(request.pathParam("id"), "1");
    assert.equal(request.queryParam("page"), "2");
    assert.equal(request.header("content-type"), "application/json");
    assert.equal(request.userId(), "alice");
    assert.deepEqual(request.bodyAs(), { text: "hi" });
    assert.throws(() => request.pathParam("missing"), { kind: "invalid-argument" } as object);
    assert.throws(() => ((request.pathParams() as any).id = "2"));
    assert.throws(() => moduleRequest({ method: "POST", path: "/", body: body("{") }).bodyAs(), { kind: "invalid-argument" } as object);
  });

  it("defaults to status 200; json and text are terminal", () => {
    const response = new ModuleResponseRecorder();
    response.status(201).header("X-A", "b").json({ ok: true });
    assert.deepEqual(response.result(), { status: 201, headers: { "x-a": "b", "content-type": "application/json" }, body: '{"ok":true}', sent: true });
    assert.throws(() => response.text("again"), { kind: "illegal-state" } as object);
    assert.equal(new ModuleResponseRecorder().result().status, 200);
  });
});

describe("module route calls", () => {
  const table = new ModuleRouteTable();
  const numberBody = (value: unknown) => {
    if (typeof (value as { n?: unknown })?.n !== "number") throw new Error("n must be a number");
    return value as { n: number };
  };
  table.post("sum", numberBody, (_req, parsed, res) => res.json({ doubled: parsed.n * 2 }));
  table.post(
    "silent",
    () => {
      throw new Error(" ");
    },
    () => {},
  );
  table.get("invalid", () => {
    throw new InvalidArgumentError("name is too long");
  });
  table.get("missing", () => {
    throw new NotFoundError("No message 7");
  });
  table.get("broken", () => {
    throw new Error("database password is hunter2");
  });
  table.get("bodyas", (req) => {
    req.bodyAs();
  });
  const call = (index: number, raw?: string) =>
    runModuleRoute(table.routes[index], { method: "POST", path: "/x", body: raw === undefined ? undefined : body(raw) }, (m) => logged.push(m));
  const logged: string[] = [];

  it("calls a typed handler with the parsed body", async () => {
    const result = await call(0, '{"n":21}');
    assert.equal(result.status, 200);
    assert.deepEqual(JSON.parse(result.body), { doubled: 42 });
  });

  it("answers an unparsable typed body with the flat 400 and does not call the handler (rule 6)", async () => {
    const syntax = await call(0, "{");
    assert.equal(syntax.status, 400);
    const parsed = JSON.parse(syntax.body);
    assert.deepEqual(Object.keys(parsed), ["error", "details"]);
    assert.equal(parsed.error, "invalid json body");
    const shape = await call(0, '{"n":"x"}');
    assert.deepEqual(JSON.parse(shape.body), { error: "invalid json body", details: "n must be a number" });
    // details only when the parser's message is not blank
    assert.deepEqual(JSON.parse((await call(1, "{}")).body), { error: "invalid json body" });
  });

  it("maps invalid-argument to 422, not-found to 404, anything else to 500 with the message logged only", async () => {
    const invalid = await call(2);
    assert.equal(invalid.status, 422);
    assert.deepEqual(JSON.parse(invalid.body), { error: { code: "VALIDATION_ERROR", message: "name is too long", status: 422 } });
    const missing = await call(3);
    assert.deepEqual(JSON.parse(missing.body), { error: { code: "NOT_FOUND", message: "No message 7", status: 404 } });
    const broken = await call(4);
    assert.deepEqual(JSON.parse(broken.body), { error: { code: "INTERNAL_ERROR", message: "An internal error occurred", status: 500 } });
    assert.ok(logged.some((line) => line.includes("hunter2")));
    const bodyAs = await call(5, "not json");
    assert.equal(bodyAs.status, 422);
    assert.equal(JSON.parse(bodyAs.body).error.code, "VALIDATION_ERROR");
  });
});

/**
 * The dashboard's pure address logic: where the API is relative to the page (a path prefix in
 * front is kept), fragment routes, the failover handoff in the fragment, the member a page moves
 * to when its controller is gone, and the mean of chart series.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { apiBase, dashboardBase } from "../../src/dashboard/lib/base.js";
import { href, parseRoute } from "../../src/dashboard/lib/route-parse.js";
import { takeHandoff, withHandoff } from "../../src/dashboard/lib/handoff.js";
import { failoverTarget } from "../../src/dashboard/lib/failover.js";
import { meanSeries } from "../../src/dashboard/lib/series.js";

describe("dashboard addresses", () => {
  test("the API is ../api/v1/ from the dashboard's directory, with any path prefix kept", () => {
    for (const [page, ui, api] of [
      ["http://127.0.0.1:8080/ui/", "http://127.0.0.1:8080/ui/", "http://127.0.0.1:8080/api/v1/"],
      ["http://127.0.0.1:8080/ui/#/groups/lobby?tab=instances", "http://127.0.0.1:8080/ui/", "http://127.0.0.1:8080/api/v1/"],
      ["https://ops.example/cloud/eu/ui/index.html?x=1#/nodes", "https://ops.example/cloud/eu/ui/", "https://ops.example/cloud/eu/api/v1/"],
      ["http://localhost:5173/ui/", "http://localhost:5173/ui/", "http://localhost:5173/api/v1/"],
    ]) {
      assert.equal(dashboardBase(page), ui, page);
      assert.equal(apiBase(dashboardBase(page)), api, page);
    }
  });

  test("fragment routes round-trip, encoded", () => {
    const link = href(["groups", "a b/c"], { tab: "instances", empty: "", none: undefined });
    assert.equal(link, "#/groups/a%20b%2Fc?tab=instances");
    const route = parseRoute(link);
    assert.deepEqual(route.parts, ["groups", "a b/c"]);
    assert.equal(route.query.get("tab"), "instances");
    assert.deepEqual(parseRoute("").parts, []);
    assert.deepEqual(parseRoute("#/%E0%A4%A").parts, ["%E0%A4%A"], "a malformed escape stays as typed");
  });

  test("a handoff travels in the fragment and is taken out of it whole", () => {
    const fragment = withHandoff("/groups/lobby?tab=players", { token: "jwt.token.here", lastSequence: 4242 });
    const { handoff, hash } = takeHandoff(`#${fragment}`);
    assert.deepEqual(handoff, { token: "jwt.token.here", lastSequence: 4242 });
    assert.equal(hash, "#/groups/lobby?tab=players");
    assert.deepEqual(takeHandoff("#/overview"), { handoff: null, hash: "#/overview" });
    assert.equal(takeHandoff(`#/x?handoff=${encodeURIComponent("{bad")}`).handoff, null);
    assert.equal(takeHandoff(`#/x?handoff=${encodeURIComponent(JSON.stringify({ token: "" }))}`).handoff, null);
    assert.equal(takeHandoff(`#/x?handoff=${encodeURIComponent(JSON.stringify({ token: "t", lastSequence: 1.5 }))}`).handoff?.lastSequence, null);
  });

  test("a page on a member moves to the leader, else the next member; a page behind a proxy stays", () => {
    const members = [
      { nodeId: "a", restAddr: "10.0.0.1:8080" },
      { nodeId: "b", restAddr: "10.0.0.2:8080" },
      { nodeId: "c", restAddr: "10.0.0.3:8080", leader: true },
    ];
    assert.equal(failoverTarget(members, "10.0.0.1:8080")?.nodeId, "c");
    assert.equal(failoverTarget(members, "10.0.0.3:8080")?.nodeId, "a");
    assert.equal(failoverTarget(members, "10.0.0.2:8080", ["10.0.0.3:8080"])?.nodeId, "a");
    assert.equal(failoverTarget(members, "ops.example"), null, "behind a proxy: the proxy fails over");
    assert.equal(failoverTarget(members, "10.0.0.1:8080", ["10.0.0.2:8080", "10.0.0.3:8080"]), null, "every other member was tried");
    assert.equal(
      failoverTarget(
        [
          { nodeId: "a", restAddr: "h:1" },
          { nodeId: "b", restAddr: "" },
        ],
        "h:1",
      ),
      null,
      "a member without a REST address is skipped",
    );
  });

  test("series are averaged per timestamp", () => {
    assert.deepEqual(
      meanSeries([
        [
          [1, 20],
          [2, 18],
        ],
        [[1, 10]],
      ]),
      [
        [1, 15],
        [2, 18],
      ],
    );
  });
});

// The embedded planner reads through an index or a bounded range whenever the query allows it,
// and streams (stopping after skip + limit) when the read order is the requested order.
import assert from "node:assert/strict";
import { it } from "node:test";
import { CollectionKeys } from "../../src/store/embedded/key-codec.js";
import { planQuery } from "../../src/store/embedded/query-plan.js";
import type { IndexSpec } from "../../src/store/ports.js";

const keys = new CollectionKeys("audit_log");
const indexes: IndexSpec[] = [
  { name: "audit_username", field: "username" },
  { name: "audit_created", field: "createdAt" },
];

function summary(plan: ReturnType<typeof planQuery>): string {
  if (plan.kind === "point") return "point";
  if (plan.kind === "points") return `points${plan.ordered ? " ordered" : ""}`;
  if (plan.kind === "documents") return `documents${plan.ordered ? " ordered" : ""}${plan.reverse ? " reverse" : ""}`;
  return `index ${plan.index.name} x${plan.ranges.length}${plan.ordered ? " ordered" : ""}${plan.reverse ? " reverse" : ""}`;
}

const cases: [string, Parameters<typeof planQuery>[2], Parameters<typeof planQuery>[3], string][] = [
  ["_id equality is a point read", { _id: "x", username: "ann" }, {}, "point"],
  ["_id $in reads the named documents", { _id: { $in: ["a", "b"] } }, {}, "points ordered"],
  ["equality on an indexed field", { username: "ann" }, {}, "index audit_username x1 ordered"],
  [
    "filtered keyset page streams the index by _id",
    { username: "ann", _id: { $lt: "c" } },
    { sort: { field: "_id", direction: -1 }, limit: 10 },
    "index audit_username x1 ordered reverse",
  ],
  ["keyset page without filter streams documents", { _id: { $lt: "c" } }, { sort: { field: "_id", direction: -1 }, limit: 10 }, "documents ordered reverse"],
  ["$in on an indexed field", { username: { $in: ["a", "b"] } }, {}, "index audit_username x2"],
  [
    "range on the indexed sort field streams",
    { createdAt: { $gte: "2026" } },
    { sort: { field: "createdAt", direction: -1 } },
    "index audit_created x1 ordered reverse",
  ],
  ["range on an indexed field, other sort", { createdAt: { $gte: "2026" } }, { sort: { field: "action", direction: 1 } }, "index audit_created x1"],
  ["indexed sort without conditions streams the index", { action: "x" }, { sort: { field: "createdAt", direction: 1 } }, "index audit_created x1 ordered"],
  ["nothing indexed: scan", { action: "x" }, { sort: { field: "action", direction: 1 } }, "documents"],
  ["nothing indexed, _id order: scan in order", { action: "x" }, {}, "documents ordered"],
];

for (const [title, filter, options, expected] of cases) {
  it(`embedded plan: ${title}`, () => {
    assert.equal(summary(planQuery(keys, indexes, filter, options)), expected);
  });
}

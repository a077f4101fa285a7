/**
 * fast-check generators of documents, filters and find options over a few fields (`a` and
 * `nested.c`, which the property tests index, and `b`, which they do not), plus the check that a
 * collection answers like the reference semantics of document-query.ts.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import { documentComparator, matchesFilter } from "../../src/store/document-query.js";
import type { Collection, CollectionSpec, Doc, Filter, FindOptions } from "../../src/store/ports.js";

/** Strings every adapter stores: \1, characters beyond the BMP, U+FFFD, case, spaces. */
export const portableStrings = ["", "a", "ab", "a\u0001", "a\u0001b", "b", "é", "\u{1F600}", "\uFFFD", "Z", "a b"];

/** The spec property tests open their collections with. */
export const queryPropertySpec: CollectionSpec = {
  indexes: [
    { name: "a", field: "a" },
    { name: "nested_c", field: "nested.c" },
  ],
};

/** Generators over the given string values. */
export function queryArbitraries(strings: readonly string[]) {
  const text = fc.constantFrom(...strings);
  const num = fc.constantFrom(-1e9, -2.5, -1, -0, 0, 0.5, 1, 2, 10, 1e12);
  const scalar = fc.oneof(text, num, fc.boolean(), fc.constant(null));
  const id = text.map((t) => `id${t}`);
  const doc = fc.record({ _id: id, a: scalar, b: scalar, nested: fc.record({ c: fc.oneof(text, num) }) }, { requiredKeys: ["_id"] });
  const bound = fc.oneof(text, num);
  const condition = fc.oneof(
    scalar,
    fc.record({ $gt: bound, $lte: bound }, { requiredKeys: [] }),
    fc.record({ $gte: bound, $lt: bound }, { requiredKeys: [] }),
    fc.array(fc.oneof(text, num, fc.boolean()), { minLength: 1, maxLength: 3 }).map(($in) => ({ $in })),
  );
  const idCondition = fc.oneof(
    id,
    fc.record({ $lt: id }),
    fc.record({ $gte: id }),
    fc.array(id, { minLength: 1, maxLength: 3 }).map(($in) => ({ $in })),
  );
  const filter = fc
    .record({ a: condition, b: condition, "nested.c": condition, _id: idCondition }, { requiredKeys: [] })
    .filter((f) => Object.values(f).every((c) => typeof c !== "object" || c === null || Object.keys(c).length > 0)) as fc.Arbitrary<Filter>;
  const options: fc.Arbitrary<FindOptions> = fc.record(
    {
      sort: fc.record({ field: fc.constantFrom("_id", "a", "b", "nested.c"), direction: fc.constantFrom(1 as const, -1 as const) }),
      skip: fc.nat(5),
      limit: fc.integer({ min: 1, max: 8 }),
    },
    { requiredKeys: [] },
  );
  const docs = fc.uniqueArray(doc, { selector: (d) => d._id, maxLength: 25 }) as fc.Arbitrary<Doc[]>;
  return { docs, filter, options };
}

/** Inserts `docs` and checks find and count for `filter`/`options` against the reference. */
export async function checkAgainstReference(collection: Collection<Doc>, docs: Doc[], filter: Filter, options: FindOptions): Promise<void> {
  await Promise.all(docs.map((d) => collection.insert(d)));
  const normalized = docs.map((d) => JSON.parse(JSON.stringify(d)) as Doc);
  const matching = normalized.filter((d) => matchesFilter(d, filter)).sort(documentComparator(options.sort));
  const skip = options.skip ?? 0;
  const expected = matching.slice(skip, options.limit === undefined ? undefined : skip + options.limit);
  const context = JSON.stringify({ filter, options });
  assert.deepEqual(
    (await collection.find(filter, options)).map((d) => d._id),
    expected.map((d) => d._id),
    context,
  );
  assert.equal(await collection.count(filter), matching.length, context);
}

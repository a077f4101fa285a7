import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { SingleFlight } from "../../src/domain/shared/single-flight.js";

function deferred<T>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

describe("SingleFlight", () => {
  test("callers arriving during a read share the next read, which starts after they arrived", async () => {
    const flights = new SingleFlight<number>();
    const gates = [deferred<number>(), deferred<number>()];
    let started = 0;
    const read = () => gates[started++].promise;
    const first = flights.run("k", read);
    const second = flights.run("k", read);
    const third = flights.run("k", read);
    await Promise.resolve();
    assert.equal(started, 1, "the second read waits for the first to settle");
    gates[0].resolve(1);
    assert.equal(await first, 1);
    await new Promise((r) => setImmediate(r));
    assert.equal(started, 2);
    gates[1].resolve(2);
    assert.deepEqual(await Promise.all([second, third]), [2, 2]);
    assert.equal(started, 2, "a burst costs at most two reads");
  });

  test("after everything settles the next call reads again; failures reach the callers", async () => {
    const flights = new SingleFlight<number>();
    let reads = 0;
    assert.equal(await flights.run("k", async () => ++reads), 1);
    assert.equal(await flights.run("k", async () => ++reads), 2);
    await assert.rejects(
      flights.run("k", async () => Promise.reject(new Error("down"))),
      /down/,
    );
    assert.equal(await flights.run("k", async () => ++reads), 3);
  });

  test("keys are independent", async () => {
    const flights = new SingleFlight<string>();
    const [a, b] = await Promise.all([flights.run("a", async () => "a"), flights.run("b", async () => "b")]);
    assert.deepEqual([a, b], ["a", "b"]);
  });
});

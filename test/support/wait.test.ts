import { strict as assert } from "node:assert";
import { test } from "node:test";
import { eventually } from "./wait.js";

test("eventually: returns the first truthy value, retrying misses and thrown errors", async () => {
  let calls = 0;
  const value = await eventually(() => {
    calls += 1;
    if (calls === 1) throw new Error("not up yet");
    return calls >= 3 ? { calls } : null;
  }, "the third call");
  assert.deepEqual(value, { calls: 3 });
});

test("eventually: times out naming what it waited for and the last error", async () => {
  await assert.rejects(
    eventually(
      () => {
        throw new Error("connection refused");
      },
      () => "the server",
      { timeoutMs: 50 },
    ),
    /timed out after 50 ms waiting for the server: Error: connection refused/,
  );
});

test("eventually: stopIf fails the wait at once", async () => {
  const startedMs = Date.now();
  await assert.rejects(
    eventually(() => false, "a line", { timeoutMs: 10_000, stopIf: () => "the process exited (1)" }),
    /the process exited \(1\) while waiting for a line/,
  );
  assert.ok(Date.now() - startedMs < 1_000);
});

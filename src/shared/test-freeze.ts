/**
 * Freeze points for end-to-end tests that must stop a controller at one exact instruction, which no
 * signal sent from outside can hit: "between the fencing check of a record write and the write"
 * (test/e2e/fenced-record-writes.test.ts), "between the fencing check of a daemon command and its
 * sending" (test/e2e/fencing-after-kv-loss.test.ts). With `CLOUD_TEST_FREEZE_AT=<point>[,<point>…]`
 * in its environment, the process stops itself with SIGSTOP the first time it reaches
 * {@link freezePoint}(`<point>`) (each point once); the test sends SIGCONT when it is done. Honoured only when the code runs from its TypeScript sources, as
 * the tests start controllers (`node --import tsx`): the built package (`dist/**.js`) ignores the
 * variable, so no deployment can be frozen through it.
 */
const honoured = import.meta.url.endsWith(".ts");
const armed = new Set(honoured ? (process.env.CLOUD_TEST_FREEZE_AT ?? "").split(",").filter((point) => point !== "") : []);

/** Stops the process here once when the test environment names `point`; otherwise does nothing. */
export function freezePoint(point: string): void {
  if (armed.size === 0 || !armed.delete(point)) return;
  process.kill(process.pid, "SIGSTOP");
}

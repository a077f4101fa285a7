// The controller presence registry: a claim, its renewals and its deletion; a second process of the
// same id refused while the first renews; a restart after a crash waiting for the dead entry to
// expire; a process whose id was taken over while it did not renew. Over the memory store and a
// real Redis.
import assert from "node:assert/strict";
import { it } from "node:test";
import { ControllerPresence, DuplicateControllerError, parsePresence, readPresence } from "../../src/coordination/controller-presence.js";
import { CONTROLLER_PRESENCE_PREFIX, controllerPresenceKey } from "../../src/coordination/keys.js";
import type { KvStore } from "../../src/store/ports.js";
import { describeEachKv, recordingLogger, withEnv, type KvEnvironment } from "./support.js";

/** Long enough in real time for the Redis variant on a loaded machine, short enough to wait out once. */
const TTL_MS = 3_000;
const RENEW_MS = TTL_MS / 3;

function presence(env: KvEnvironment, kv: KvStore, controllerId: string, extra: { onTakenOver?: () => void; schedules?: boolean } = {}) {
  const log = recordingLogger();
  const p = new ControllerPresence({
    kv,
    controllerId,
    ttlMs: TTL_MS,
    schedules: extra.schedules ?? true,
    clock: env.clock,
    logger: log.logger,
    onTakenOver: extra.onTakenOver,
  });
  return { presence: p, records: log.records };
}

/** Settles `promise` while time passes in `stepMs` steps (real time too on Redis); at most `stepsMax` steps. */
async function settleWhileTimePasses<T>(
  env: KvEnvironment,
  promise: Promise<T>,
  stepMs: number,
  stepsMax: number,
): Promise<{ value?: T; error?: unknown; steps: number }> {
  let outcome: { value?: T; error?: unknown } | undefined;
  promise.then(
    (value) => (outcome = { value }),
    (error: unknown) => (outcome = { error }),
  );
  for (let steps = 0; steps <= stepsMax; steps++) {
    for (let i = 0; i < 20 && !outcome; i++) await new Promise((resolve) => setImmediate(resolve));
    if (outcome) return { ...outcome, steps };
    await env.expire(stepMs);
  }
  throw new Error(`not settled within ${stepsMax} steps of ${stepMs} ms`);
}

async function clearPresence(kv: KvStore): Promise<void> {
  for (const key of await kv.keys(CONTROLLER_PRESENCE_PREFIX)) await kv.delete(key);
}

describeEachKv("ControllerPresence", (makeEnv) => {
  it("claims a free id at once, renews it with a changing value, lists it, and deletes it on stop", () =>
    withEnv(makeEnv, async (env) => {
      const kv = await env.connect();
      await clearPresence(kv);
      const id = env.unique("ctl");
      const { presence: p } = presence(env, kv, id);
      await p.claim();
      const first = await kv.get(controllerPresenceKey(id));
      assert.equal(parsePresence(first!)?.nonce, p.nonce);
      env.clock.advance(RENEW_MS);
      await p.idle();
      const second = await kv.get(controllerPresenceKey(id));
      assert.notEqual(second, first, "a renewal changes the value");
      assert.equal(parsePresence(second!)?.renewals, 1);
      assert.deepEqual(await p.liveControllers(), [id]);
      await p.stop();
      assert.equal(await kv.get(controllerPresenceKey(id)), null);
    }));

  it("refuses a second process of the same id while the first renews, and the first keeps its entry", () =>
    withEnv(makeEnv, async (env) => {
      const kv = await env.connect();
      await clearPresence(kv);
      const id = env.unique("ctl");
      const first = presence(env, kv, id);
      await first.presence.claim();
      const second = presence(env, await env.connect(), id);
      const outcome = await settleWhileTimePasses(env, second.presence.claim(), RENEW_MS / 4, 12);
      assert.ok(outcome.error instanceof DuplicateControllerError, `refused, not ${String(outcome.error)}`);
      assert.equal(outcome.error.code, "DUPLICATE_CONTROLLER_ID");
      assert.match(outcome.error.message, new RegExp(`Another controller process is running with controller id ${id} \\(started at `));
      assert.ok(second.records.some((r) => r.level === "INFO" && r.message.includes("waiting up to")));
      assert.equal(parsePresence((await kv.get(controllerPresenceKey(id)))!)?.nonce, first.presence.nonce, "the first keeps its entry");
      assert.equal(first.presence.lost(), false);
      await second.presence.stop();
      assert.equal(parsePresence((await kv.get(controllerPresenceKey(id)))!)?.nonce, first.presence.nonce, "a refused claim deletes nothing");
      await first.presence.stop();
    }));

  it("a restart after a crash waits for the dead process's entry to expire, then claims the id", () =>
    withEnv(makeEnv, async (env) => {
      const kv = await env.connect();
      await clearPresence(kv);
      const id = env.unique("ctl");
      const dead = presence(env, kv, id);
      await dead.presence.claim();
      // The process dies: nothing renews (its timer is stopped without deleting the entry).
      (dead.presence as unknown as { timer: { cancel(): void } }).timer.cancel();
      const restarted = presence(env, await env.connect(), id);
      const startedAtMs = env.clock.nowMs();
      const outcome = await settleWhileTimePasses(env, restarted.presence.claim(), TTL_MS / 6, 12);
      assert.equal(outcome.error, undefined, String(outcome.error));
      const waitedMs = env.clock.nowMs() - startedAtMs;
      assert.ok(waitedMs <= TTL_MS + TTL_MS / 3, `waited ${waitedMs} ms, at most about one TTL`);
      assert.equal(parsePresence((await kv.get(controllerPresenceKey(id)))!)?.nonce, restarted.presence.nonce);
      await restarted.presence.stop();
    }));

  it("a graceful stop lets the next process of the id claim it without waiting", () =>
    withEnv(makeEnv, async (env) => {
      const kv = await env.connect();
      await clearPresence(kv);
      const id = env.unique("ctl");
      const before = presence(env, kv, id);
      await before.presence.claim();
      await before.presence.stop();
      const after = presence(env, kv, id);
      const startedAtMs = env.clock.nowMs();
      await after.presence.claim();
      assert.equal(env.clock.nowMs(), startedAtMs);
      await after.presence.stop();
    }));

  it("a process whose id was taken over while it did not renew learns it at its next renewal and deletes nothing", () =>
    withEnv(makeEnv, async (env) => {
      const kv = await env.connect();
      await clearPresence(kv);
      const id = env.unique("ctl");
      let takenOver = 0;
      const frozen = presence(env, kv, id, { onTakenOver: () => takenOver++ });
      await frozen.presence.claim();
      await kv.delete(controllerPresenceKey(id)); // its entry ran out while it was frozen
      const successor = presence(env, await env.connect(), id);
      await successor.presence.claim();
      env.clock.advance(RENEW_MS); // both renew; the frozen one finds the successor's nonce
      await frozen.presence.idle();
      await successor.presence.idle();
      assert.equal(frozen.presence.lost(), true);
      assert.equal(takenOver, 1);
      assert.ok(frozen.records.some((r) => r.level === "ERROR" && r.message.includes(`Controller id ${id} was taken over by another process`)));
      await frozen.presence.stop();
      assert.equal(parsePresence((await kv.get(controllerPresenceKey(id)))!)?.nonce, successor.presence.nonce);
      assert.equal(successor.presence.lost(), false);
      await successor.presence.stop();
    }));

  it("writes an entry that expired again (a flushed store) without calling it a takeover", () =>
    withEnv(makeEnv, async (env) => {
      const kv = await env.connect();
      await clearPresence(kv);
      const id = env.unique("ctl");
      const p = presence(env, kv, id);
      await p.presence.claim();
      await kv.delete(controllerPresenceKey(id));
      env.clock.advance(RENEW_MS);
      await p.presence.idle();
      assert.equal(p.presence.lost(), false);
      assert.equal(parsePresence((await kv.get(controllerPresenceKey(id)))!)?.nonce, p.presence.nonce);
      await p.presence.stop();
    }));

  it("stops counting a controller whose entry missed a renewal (half its TTL or less left), before the entry expires", () =>
    withEnv(makeEnv, async (env) => {
      const kv = await env.connect();
      await clearPresence(kv);
      const [live, dead] = [env.unique("ctl-live"), env.unique("ctl-dead")];
      const pl = presence(env, kv, live);
      const pd = presence(env, kv, dead);
      await pl.presence.claim();
      await pd.presence.claim();
      (pd.presence as unknown as { timer: { cancel(): void } }).timer.cancel(); // it dies
      for (let passed = 0; passed < TTL_MS / 2 + RENEW_MS / 4; passed += RENEW_MS / 4) {
        await env.expire(RENEW_MS / 4);
        await pl.presence.idle();
      }
      assert.notEqual(await kv.get(controllerPresenceKey(dead)), null, "its entry is still there");
      assert.deepEqual(await pl.presence.liveControllers(), [live]);
      await pl.presence.stop();
      await clearPresence(kv);
    }));

  it("lists the live controllers that take scopes; a registry read finding another nonce under its id marks a takeover", () =>
    withEnv(makeEnv, async (env) => {
      const kv = await env.connect();
      await clearPresence(kv);
      const [a, b, c] = [env.unique("ctl-a"), env.unique("ctl-b"), env.unique("ctl-c")];
      const pa = presence(env, kv, a);
      const pb = presence(env, kv, b);
      const pc = presence(env, kv, c, { schedules: false });
      for (const p of [pa, pb, pc]) await p.presence.claim();
      assert.deepEqual((await pa.presence.liveControllers()).sort(), [a, b].sort());
      assert.deepEqual((await readPresence(kv)).map((e) => e.controllerId).sort(), [a, b, c].sort());
      await kv.set(
        controllerPresenceKey(b),
        JSON.stringify({ nonce: "other", startedAt: "2026-06-01T00:00:00.000Z", renewals: 0, schedules: true, ttlMs: TTL_MS }),
      );
      await pb.presence.liveControllers();
      assert.equal(pb.presence.lost(), true);
      for (const p of [pa, pb, pc]) await p.presence.stop();
      await clearPresence(kv);
    }));
});

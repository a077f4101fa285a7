/**
 * Login back-off per account and per client address. The store-level suite runs over the memory
 * key-value store and a real Redis with two throttles sharing one store, as two controllers would;
 * the HTTP suite signs in over a real server from several loopback addresses (127.0.0.x) with the
 * app's clock advanced by hand, so no test waits a back-off out.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { request as httpRequest } from "node:http";
import {
  LOGIN_ACCOUNT_POLICY,
  LOGIN_ADDRESS_POLICY,
  LoginThrottle,
  loginDelayMs,
  type LoginAdmission,
  type LoginBackoffPolicy,
} from "../../src/auth/login-throttle.js";
import { loginAddressKey } from "../../src/coordination/keys.js";
import { FakeClock } from "../support/fake-clock.js";
import { describeEachKv, withEnv } from "../coordination/support.js";
import { startTestApp, type TestApp } from "../support/http-app.js";

const SECOND_MS = 1000;

describe("login back-off delays", () => {
  it("five failures are free, then 1 s doubling up to 15 min", () => {
    const delays = [1, 2, 3, 4, 5, 6, 7, 8, 15, 16, 17, 10_000].map((n) => loginDelayMs(LOGIN_ACCOUNT_POLICY, n));
    assert.deepEqual(delays, [0, 0, 0, 0, 0, 1_000, 2_000, 4_000, 512_000, 900_000, 900_000, 900_000]);
    assert.equal(loginDelayMs(LOGIN_ADDRESS_POLICY, 20), 0);
    assert.equal(loginDelayMs(LOGIN_ADDRESS_POLICY, 21), 1_000);
  });
});

describeEachKv("LoginThrottle", (makeEnv) => {
  const refused = (admission: LoginAdmission) => (admission.admitted ? null : admission.retryAfterMs);

  it("two controllers over one store keep one streak per account: the sixth failure anywhere blocks it everywhere", () =>
    withEnv(makeEnv, async (env) => {
      const first = new LoginThrottle({ kv: await env.connect(), clock: env.clock });
      const second = new LoginThrottle({ kv: await env.connect(), clock: env.clock });
      const user = env.unique("alice");
      for (let i = 0; i < 6; i++) {
        const admission = await (i % 2 === 0 ? first : second).admit(user, `10.0.0.${i}`);
        assert.equal(admission.admitted, true, `attempt ${i + 1}`);
      }
      assert.equal(refused(await first.admit(user, "10.0.1.1")), SECOND_MS);
      assert.equal(refused(await second.admit(user, "10.0.1.2")), SECOND_MS);
      env.clock.advance(SECOND_MS);
      assert.equal((await second.admit(user, "10.0.1.3")).admitted, true);
      assert.equal(refused(await first.admit(user, "10.0.1.4")), 2 * SECOND_MS, "the next block is twice as long");
    }));

  it("parallel attempts through both controllers get no more admitted than a sequence would", () =>
    withEnv(makeEnv, async (env) => {
      const throttles = [new LoginThrottle({ kv: await env.connect(), clock: env.clock }), new LoginThrottle({ kv: await env.connect(), clock: env.clock })];
      const user = env.unique("bob");
      const admissions = await Promise.all(Array.from({ length: 40 }, (_, i) => throttles[i % 2].admit(user, `10.0.2.${i}`)));
      const admitted = admissions.filter((a) => a.admitted).length;
      assert.ok(admitted >= 1 && admitted <= LOGIN_ACCOUNT_POLICY.freeFailures + 1, `admitted ${admitted}`);
      for (const a of admissions) if (!a.admitted) assert.ok(a.retryAfterMs > 0 && a.retryAfterMs <= SECOND_MS);
    }));

  it("a success clears the account's streak and charges the address nothing", () =>
    withEnv(makeEnv, async (env) => {
      const kv = await env.connect();
      const throttle = new LoginThrottle({ kv, clock: env.clock });
      const user = env.unique("carol");
      const address = `10.0.3.${Math.floor(Math.random() * 250)}`;
      await kv.delete(loginAddressKey(address));
      for (let i = 0; i < 5; i++) assert.equal((await throttle.admit(user, address)).admitted, true);
      assert.equal((await throttle.admit(user, address)).admitted, true, "the sixth attempt (the right password)");
      await throttle.succeeded(user, address);
      for (let i = 0; i < 6; i++) assert.equal((await throttle.admit(user, address)).admitted, true, `after the success, attempt ${i + 1} is free again`);
      assert.equal(JSON.parse((await kv.get(loginAddressKey(address)))!).attempts, 11, "the address counts the failures only");
    }));

  it("the block doubles up to the policy's cap", () =>
    withEnv(makeEnv, async (env) => {
      const policy: LoginBackoffPolicy = { freeFailures: 1, firstDelayMs: SECOND_MS, delayMaxMs: 4 * SECOND_MS, forgetAfterMs: 60_000 };
      const throttle = new LoginThrottle({ kv: await env.connect(), clock: env.clock, account: policy });
      const user = env.unique("dave");
      const waits: number[] = [];
      assert.equal((await throttle.admit(user, "10.0.4.1")).admitted, true);
      for (let i = 0; i < 5; i++) {
        assert.equal((await throttle.admit(user, "10.0.4.1")).admitted, true);
        const wait = refused(await throttle.admit(user, "10.0.4.1"))!;
        waits.push(wait);
        env.clock.advance(wait);
      }
      assert.deepEqual(
        waits,
        [1, 2, 4, 4, 4].map((s) => s * SECOND_MS),
      );
    }));

  it("a streak is forgotten an hour after its block ends", async (t) => {
    await withEnv(makeEnv, async (env) => {
      if (env.backend === "redis") {
        t.skip("Redis expires keys on its own clock; waiting an hour is not a test");
        return;
      }
      const throttle = new LoginThrottle({ kv: await env.connect(), clock: env.clock });
      const user = env.unique("erin");
      for (let i = 0; i < 6; i++) await throttle.admit(user, `10.0.5.${i}`);
      assert.equal(refused(await throttle.admit(user, "10.0.5.9")), SECOND_MS);
      await env.expire(SECOND_MS + LOGIN_ACCOUNT_POLICY.forgetAfterMs - 1);
      assert.equal((await throttle.admit(user, "10.0.5.9")).admitted, true, "the seventh attempt, still remembered");
      assert.equal(refused(await throttle.admit(user, "10.0.5.9")), 2 * SECOND_MS);
      await env.expire(2 * SECOND_MS + LOGIN_ACCOUNT_POLICY.forgetAfterMs);
      for (let i = 0; i < 6; i++) assert.equal((await throttle.admit(user, "10.0.5.9")).admitted, true, `forgotten: attempt ${i + 1} is free`);
    });
  });
});

interface LoginReply {
  status: number;
  retryAfter: string | null;
  body: any;
}

describe("login back-off over HTTP", () => {
  let t: TestApp;
  const clock = new FakeClock(Date.now());

  /** POST /api/v1/auth/login from `address` (a loopback address this machine answers on). */
  const loginFrom = (address: string, username: string, password: string): Promise<LoginReply> =>
    new Promise((resolve, reject) => {
      const payload = JSON.stringify({ username, password });
      const req = httpRequest(
        `${t.baseUrl}/api/v1/auth/login`,
        { method: "POST", localAddress: address, agent: false, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(payload) } },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (chunk: Buffer) => chunks.push(chunk));
          res.on("end", () => {
            const retryAfter = res.headers["retry-after"];
            resolve({
              status: res.statusCode!,
              retryAfter: typeof retryAfter === "string" ? retryAfter : null,
              body: JSON.parse(Buffer.concat(chunks).toString("utf8")),
            });
          });
          res.on("error", reject);
        },
      );
      req.on("error", reject);
      req.end(payload);
    });

  const assertRateLimited = (reply: LoginReply, seconds: number, what: string) => {
    assert.equal(reply.status, 429, `${what}: ${JSON.stringify(reply.body)}`);
    assert.equal(reply.retryAfter, String(seconds), what);
    assert.deepEqual(reply.body, { error: { code: "RATE_LIMITED", message: `Too many requests; retry after ${seconds} s`, status: 429 } }, what);
  };

  /**
   * Brute force on one account from one address: six wrong passwords, then a refusal; after each
   * wait one more try and a longer refusal. Returns what came back, in order.
   */
  const bruteForce = async (address: string, username: string): Promise<{ status: number; retryAfter: string | null }[]> => {
    const seen: { status: number; retryAfter: string | null }[] = [];
    const attempt = async () => {
      const reply = await loginFrom(address, username, "guess-password");
      seen.push({ status: reply.status, retryAfter: reply.retryAfter });
      return reply;
    };
    for (let i = 0; i < 6; i++) assert.equal((await attempt()).status, 401, `${username}: failure ${i + 1} costs nothing`);
    for (const seconds of [1, 2, 4, 8]) {
      assertRateLimited(await attempt(), seconds, `${username}: blocked for ${seconds} s`);
      clock.advance(seconds * SECOND_MS - 1);
      assertRateLimited(await attempt(), 1, `${username}: still blocked 1 ms before the end`);
      clock.advance(1);
      assert.equal((await attempt()).status, 401, `${username}: one more try after ${seconds} s`);
    }
    return seen;
  };

  before(async () => {
    t = await startTestApp({ clock });
    for (const name of ["alice", "bob", "carol", "dave", "erin"])
      await t.auth.users.create({ username: name, password: `${name}-password-1`, roles: ["VIEWER"] });
  });
  after(() => t.close());

  it("an operator who mistyped twice signs in at once, and the slate is clean afterwards", async () => {
    for (let round = 0; round < 3; round++) {
      assert.equal((await loginFrom("127.0.0.11", "alice", "alice-pasword-1")).status, 401);
      assert.equal((await loginFrom("127.0.0.11", "alice", "alice-password")).status, 401);
      const reply = await loginFrom("127.0.0.11", "alice", "alice-password-1");
      assert.equal(reply.status, 200, JSON.stringify(reply.body));
      assert.equal(typeof reply.body.token, "string");
    }
    // Nine logins, six of them wrong, and no back-off: each success started the account afresh.
  });

  it("brute force gets 429 with a growing Retry-After, and the right password waits too", async () => {
    await bruteForce("127.0.0.12", "bob");
    assertRateLimited(await loginFrom("127.0.0.12", "bob", "bob-password-1"), 16, "the right password during the block");
    clock.advance(16 * SECOND_MS);
    assert.equal((await loginFrom("127.0.0.12", "bob", "bob-password-1")).status, 200, "after the wait");
    assert.equal((await loginFrom("127.0.0.12", "bob", "wrong")).status, 401, "a success resets the account");
  });

  it("an unknown account gets exactly the answers a real one gets", async () => {
    const known = await bruteForce("127.0.0.13", "carol");
    const unknown = await bruteForce("127.0.0.14", "nobody-by-this-name");
    assert.deepEqual(unknown, known);
  });

  it("other accounts from another address are unaffected; the blocked account is blocked from every address", async () => {
    for (let i = 0; i < 6; i++) await loginFrom("127.0.0.15", "dave", "guess-password");
    assertRateLimited(await loginFrom("127.0.0.15", "dave", "guess-password"), 1, "dave from .15");
    assert.equal((await loginFrom("127.0.0.16", "alice", "alice-password-1")).status, 200, "alice from another address");
    assert.equal((await loginFrom("127.0.0.16", "alice", "wrong")).status, 401, "alice's own mistakes are hers");
    assertRateLimited(await loginFrom("127.0.0.16", "dave", "dave-password-1"), 1, "dave from another address");
  });

  it("one address trying many accounts is stopped after 20 failures; other addresses are not", async () => {
    for (let i = 1; i <= LOGIN_ADDRESS_POLICY.freeFailures + 1; i++) {
      assert.equal((await loginFrom("127.0.0.17", `spray-${i}`, "password-1")).status, 401, `account ${i}`);
    }
    assertRateLimited(await loginFrom("127.0.0.17", "spray-99", "password-1"), 1, "a fresh account from the same address");
    assertRateLimited(await loginFrom("127.0.0.17", "alice", "alice-password-1"), 1, "even the right password from that address");
    assert.equal((await loginFrom("127.0.0.18", "alice", "alice-password-1")).status, 200, "another address");
    clock.advance(SECOND_MS);
  });

  it("parallel guesses get no more through than sequential ones", async () => {
    const replies = await Promise.all(Array.from({ length: 30 }, () => loginFrom("127.0.0.19", "erin", "guess-password")));
    const failures = replies.filter((r) => r.status === 401).length;
    const limited = replies.filter((r) => r.status === 429 && r.retryAfter === "1").length;
    assert.ok(failures >= 1 && failures <= LOGIN_ACCOUNT_POLICY.freeFailures + 1, `${failures} guesses checked`);
    assert.equal(failures + limited, replies.length, replies.map((r) => r.status).join(","));
  });
});

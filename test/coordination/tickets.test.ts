// Single-use tickets over the memory store and a real Redis.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ticketKey } from "../../src/coordination/keys.js";
import { TICKET_TTL_MS_DEFAULT, Tickets, type TicketPayload } from "../../src/coordination/tickets.js";
import { AssertionError } from "../../src/shared/errors.js";
import { MemoryKvStore } from "../../src/store/memory/memory-kv-store.js";
import { describeEachKv, withEnv } from "./support.js";

const SHORT_TTL_MS = 200;

type ConsoleTicket = TicketPayload & { kind: "console"; instanceId: string; username: string };

describeEachKv("Tickets", (makeEnv) => {
  it("issues 24 random bytes as URL-safe base64 without padding, stored with the TTL", () =>
    withEnv(makeEnv, async (env) => {
      const kv = await env.connect();
      const tickets = new Tickets<ConsoleTicket>({ kv, clock: env.clock });
      const issued = await tickets.issue({ kind: "console", instanceId: "lobby-1", username: "alice" });
      assert.match(issued.ticket, /^[A-Za-z0-9_-]{32}$/);
      assert.equal(Buffer.from(issued.ticket, "base64url").length, 24);
      assert.equal(issued.expiresAt, new Date(env.clock.nowMs() + TICKET_TTL_MS_DEFAULT).toISOString());
      const remaining = await kv.ttlMs(ticketKey(issued.ticket));
      assert.ok(remaining !== null && remaining > TICKET_TTL_MS_DEFAULT - 1_000 && remaining <= TICKET_TTL_MS_DEFAULT, `remaining ${remaining}`);
      const other = await tickets.issue({ kind: "console", instanceId: "lobby-1", username: "alice" });
      assert.notEqual(other.ticket, issued.ticket);
    }));

  it("redeems once: the payload the first time, null after", () =>
    withEnv(makeEnv, async (env) => {
      const tickets = new Tickets<ConsoleTicket>({ kv: await env.connect(), clock: env.clock });
      const payload: ConsoleTicket = { kind: "console", instanceId: "lobby-1", username: "alice" };
      const { ticket } = await tickets.issue(payload);
      assert.deepEqual(await tickets.redeem(ticket), payload);
      assert.equal(await tickets.redeem(ticket), null);
    }));

  it("another controller redeems a ticket this one issued; of concurrent redeems exactly one wins", () =>
    withEnv(makeEnv, async (env) => {
      const issuer = new Tickets({ kv: await env.connect(), clock: env.clock });
      const redeemers = await Promise.all(Array.from({ length: 6 }, async () => new Tickets({ kv: await env.connect(), clock: env.clock })));
      const { ticket } = await issuer.issue({ kind: "events", username: "bob" });
      const results = await Promise.all(redeemers.map((tickets) => tickets.redeem(ticket)));
      assert.deepEqual(
        results.filter((r) => r !== null),
        [{ kind: "events", username: "bob" }],
      );
    }));

  it("expires after its TTL", () =>
    withEnv(makeEnv, async (env) => {
      const tickets = new Tickets({ kv: await env.connect(), clock: env.clock, ttlMs: SHORT_TTL_MS });
      const { ticket } = await tickets.issue({ kind: "events", username: "bob" });
      const { ticket: kept } = await tickets.issue({ kind: "events", username: "bob" });
      await env.expire(SHORT_TTL_MS / 2);
      assert.deepEqual(await tickets.redeem(kept), { kind: "events", username: "bob" }, "valid within the TTL");
      await env.expire(SHORT_TTL_MS / 2 + 50);
      assert.equal(await tickets.redeem(ticket), null);
    }));

  it("a redeem for another purpose gets nothing and uses the ticket up", () =>
    withEnv(makeEnv, async (env) => {
      const tickets = new Tickets({ kv: await env.connect(), clock: env.clock });
      const { ticket } = await tickets.issue({ kind: "console", instanceId: "lobby-1", username: "alice" });
      assert.equal(await tickets.redeem(ticket, "logs"), null);
      assert.equal(await tickets.redeem(ticket, "console"), null, "used up");
      const { ticket: next } = await tickets.issue({ kind: "console", instanceId: "lobby-1", username: "alice" });
      assert.deepEqual(await tickets.redeem(next, "console"), { kind: "console", instanceId: "lobby-1", username: "alice" });
    }));

  it("refuses malformed tickets without touching the store", () =>
    withEnv(makeEnv, async (env) => {
      const kv = await env.connect();
      const tickets = new Tickets({ kv, clock: env.clock });
      await kv.set(ticketKey("*"), JSON.stringify({ kind: "events" }));
      for (const bad of ["", "*", "short", "a".repeat(33), "=".repeat(32), "a/b+".repeat(8)]) assert.equal(await tickets.redeem(bad), null, bad);
      assert.equal(await kv.get(ticketKey("*")), JSON.stringify({ kind: "events" }));
    }));
});

describe("Tickets options", () => {
  it("needs a kind, a bounded payload and a positive TTL", async () => {
    const kv = new MemoryKvStore();
    const tickets = new Tickets({ kv });
    await assert.rejects(tickets.issue({ kind: "" }), AssertionError);
    await assert.rejects(tickets.issue({ kind: "events", blob: "x".repeat(5_000) }), AssertionError);
    assert.throws(() => new Tickets({ kv, ttlMs: 0 }), AssertionError);
    await kv.close();
  });

  it("takes its bytes from the injected source", async () => {
    const kv = new MemoryKvStore();
    const tickets = new Tickets({ kv, randomBytes: (size) => new Uint8Array(size).fill(0xfb) });
    const { ticket } = await tickets.issue({ kind: "events" });
    assert.equal(ticket, "-_v7".repeat(8));
    await assert.rejects(tickets.issue({ kind: "events" }), /collision/, "a repeating source is caught");
    await kv.close();
  });
});

// The node-session registry over the memory store and a real Redis.
import assert from "node:assert/strict";
import { it } from "node:test";
import { nodeSessionKey } from "../../src/coordination/keys.js";
import { NodeSessionRegistry } from "../../src/coordination/session-registry.js";
import { describeEachKv, withEnv } from "./support.js";

const SESSION_TTL_MS = 200;

describeEachKv("NodeSessionRegistry", (makeEnv) => {
  it("registers, looks up and stores under cloud:v1:session:node:<nodeId> with the TTL", () =>
    withEnv(makeEnv, async (env) => {
      const kv = await env.connect();
      const registry = new NodeSessionRegistry({ kv, sessionTtlMs: SESSION_TTL_MS });
      const nodeId = env.unique("node");
      assert.equal(await registry.lookup(nodeId), null);
      await registry.register(nodeId, "c1", "s1", 1);
      assert.deepEqual(await registry.lookup(nodeId), { nodeId, controllerId: "c1", sessionId: "s1", epoch: 1 });
      const remaining = await kv.ttlMs(nodeSessionKey(nodeId));
      assert.ok(remaining !== null && remaining > 0 && remaining <= SESSION_TTL_MS, `remaining ${remaining}`);
      assert.equal(nodeSessionKey(nodeId), `cloud:v1:session:node:${nodeId}`);
    }));

  it("expires without heartbeats and stays while heartbeats renew it", () =>
    withEnv(makeEnv, async (env) => {
      const registry = new NodeSessionRegistry({ kv: await env.connect(), sessionTtlMs: SESSION_TTL_MS });
      const [renewed, silent] = [env.unique("node"), env.unique("node")];
      await registry.register(renewed, "c1", "s1", 1);
      await registry.register(silent, "c1", "s2", 1);
      for (let i = 0; i < 3; i++) {
        await env.expire(SESSION_TTL_MS / 2);
        assert.equal(await registry.renew(renewed, "c1", "s1", 1), true);
      }
      assert.equal(await registry.lookup(silent), null, "expired");
      assert.deepEqual(await registry.lookup(renewed), { nodeId: renewed, controllerId: "c1", sessionId: "s1", epoch: 1 });
    }));

  it("the newest session wins: the replaced session's renewals and unregistration leave it alone", () =>
    withEnv(makeEnv, async (env) => {
      const first = new NodeSessionRegistry({ kv: await env.connect(), sessionTtlMs: SESSION_TTL_MS });
      const second = new NodeSessionRegistry({ kv: await env.connect(), sessionTtlMs: SESSION_TTL_MS });
      const nodeId = env.unique("node");
      assert.equal(await first.register(nodeId, "c1", "s1", 1), true);
      assert.equal(await second.register(nodeId, "c2", "s2", 2), true); // the daemon reconnected to another controller
      assert.equal(await first.renew(nodeId, "c1", "s1", 1), false, "replaced");
      assert.equal(await first.register(nodeId, "c1", "s1", 1), false, "a controller that resumes after a freeze cannot write its old session back");
      assert.equal(await first.unregister(nodeId, "s1"), false);
      assert.deepEqual(await first.lookup(nodeId), { nodeId, controllerId: "c2", sessionId: "s2", epoch: 2 });
      assert.equal(await second.register(nodeId, "c2", "s2", 2), true, "the holder's own registration renews it");
      assert.equal(await second.unregister(nodeId, "s2"), true);
      assert.equal(await first.lookup(nodeId), null);
      assert.equal(await second.unregister(nodeId, "s2"), false, "already gone");
    }));

  it("a heartbeat after the entry expired writes it again unless another session took the node", () =>
    withEnv(makeEnv, async (env) => {
      const registry = new NodeSessionRegistry({ kv: await env.connect(), sessionTtlMs: SESSION_TTL_MS });
      const nodeId = env.unique("node");
      await registry.register(nodeId, "c1", "s1", 3);
      await env.expire(SESSION_TTL_MS + 50);
      assert.equal(await registry.renew(nodeId, "c1", "s1", 3), true);
      assert.deepEqual(await registry.lookup(nodeId), { nodeId, controllerId: "c1", sessionId: "s1", epoch: 3 });
      await env.expire(SESSION_TTL_MS + 50);
      await registry.register(nodeId, "c2", "s9", 4);
      assert.equal(await registry.renew(nodeId, "c1", "s1", 3), false);
    }));

  it("an entry written without an epoch counts as epoch 0: any session replaces it", () =>
    withEnv(makeEnv, async (env) => {
      const kv = await env.connect();
      const registry = new NodeSessionRegistry({ kv, sessionTtlMs: SESSION_TTL_MS });
      const nodeId = env.unique("node");
      await kv.set(nodeSessionKey(nodeId), JSON.stringify({ controllerId: "old", sessionId: "s0" }), { ttlMs: SESSION_TTL_MS });
      assert.deepEqual(await registry.lookup(nodeId), { nodeId, controllerId: "old", sessionId: "s0", epoch: 0 });
      assert.equal(await registry.register(nodeId, "c1", "s1", 1), true);
    }));

  it("reads an unreadable entry as no session", () =>
    withEnv(makeEnv, async (env) => {
      const kv = await env.connect();
      const registry = new NodeSessionRegistry({ kv, sessionTtlMs: SESSION_TTL_MS });
      const nodeId = env.unique("node");
      await kv.set(nodeSessionKey(nodeId), "not json", { ttlMs: SESSION_TTL_MS });
      assert.equal(await registry.lookup(nodeId), null);
      assert.equal(await registry.unregister(nodeId, "s1"), false);
      await kv.set(nodeSessionKey(nodeId), JSON.stringify({ controllerId: 7 }), { ttlMs: SESSION_TTL_MS });
      assert.equal(await registry.lookup(nodeId), null);
    }));
});

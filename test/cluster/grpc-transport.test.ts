import { after, test } from "node:test";
import assert from "node:assert/strict";
import type { Message, NodeId } from "../../raft/types.js";
import { createClusterCa, issueNodeCertificate, type ClusterCa } from "../../src/cluster/identity/ca.js";
import { GrpcTransport, type MessageCodec, type TransportHandler } from "../../src/cluster/raft-host/grpc-transport.js";
import { freePorts } from "./support/free-ports.js";
import { eventually } from "../support/wait.js";

const ca = createClusterCa();
const certs = new Map<NodeId, { certPem: string; keyPem: string }>();
const certFor = (id: NodeId, authority: ClusterCa = ca) => {
  if (authority !== ca) return issueNodeCertificate(authority, { nodeId: id });
  if (!certs.has(id)) certs.set(id, issueNodeCertificate(ca, { nodeId: id }));
  return certs.get(id)!;
};

/** JSON stands in for the library's binary codec: the transport never looks inside. */
const jsonCodec: MessageCodec = {
  encode: (m) => new TextEncoder().encode(JSON.stringify({ ...m, entries: [], context: [...m.context], snapshot: null })),
  decode: (bytes) => {
    const raw = JSON.parse(new TextDecoder().decode(bytes)) as Message & { context: number[] };
    return { ...raw, context: new Uint8Array(raw.context) };
  },
};

function message(from: NodeId, to: NodeId, index: number, type: Message["type"] = "app"): Message {
  return { type, from, to, term: 1, logTerm: 1, index, entries: [], commit: 0, snapshot: null, reject: false, rejectHint: 0, context: new Uint8Array() };
}

class Recorder implements TransportHandler {
  received: Message[] = [];
  unreachable: NodeId[] = [];
  snapshots: [NodeId, boolean][] = [];
  receive(m: Message) {
    this.received.push(m);
  }
  reportUnreachable(peer: NodeId) {
    this.unreachable.push(peer);
  }
  reportSnapshot(peer: NodeId, ok: boolean) {
    this.snapshots.push([peer, ok]);
  }
}

const started: GrpcTransport[] = [];
after(async () => {
  for (const transport of started) await transport.stop();
});

async function startTransport(id: NodeId, port: number, peers: Record<NodeId, string>, authority: ClusterCa = ca) {
  const handler = new Recorder();
  const cert = certFor(id, authority);
  const transport = new GrpcTransport({
    clusterId: "test",
    nodeId: id,
    listenAddress: `127.0.0.1:${port}`,
    peers,
    tls: { caPem: ca.certPem, ...cert },
    codec: jsonCodec,
    outboundQueueMessagesMax: 64,
  });
  transport.setHandler(handler);
  await transport.start();
  started.push(transport);
  return { transport, handler };
}

test("messages reach the peer over mutual TLS, in order", async () => {
  const [pa, pb] = await freePorts(2);
  const peers = { a: `127.0.0.1:${pa}`, b: `127.0.0.1:${pb}` };
  const a = await startTransport("a", pa!, peers);
  const b = await startTransport("b", pb!, peers);
  for (let batch = 0; batch < 10; batch++) {
    for (let i = 1; i <= 50; i++) a.transport.send([message("a", "b", batch * 50 + i)]);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  await eventually(() => b.handler.received.length === 500, "500 messages at b", 5_000);
  assert.deepEqual(a.handler.unreachable, []);
  assert.deepEqual(
    b.handler.received.map((m) => m.index),
    Array.from({ length: 500 }, (_, i) => i + 1),
  );
  b.transport.send([message("b", "a", 7, "snap")]);
  await eventually(() => a.handler.received.length === 1 && b.handler.snapshots.length === 1, "the snapshot at a and its report at b", 5_000);
  assert.deepEqual(b.handler.snapshots, [["a", true]]);
});

test("an unknown receiver and a full queue to a dead peer are reported unreachable", async () => {
  const [pa, pdead] = await freePorts(2);
  const a = await startTransport("c", pa!, { c: `127.0.0.1:${pa}`, dead: `127.0.0.1:${pdead}` });
  a.transport.send([message("c", "nobody", 1)]);
  assert.deepEqual(a.handler.unreachable, ["nobody"]);
  for (let i = 0; i < 200; i++) a.transport.send([message("c", "dead", i)]);
  await eventually(() => a.handler.unreachable.includes("dead"), "the dead peer reported unreachable", 5_000);
});

test("a peer with a certificate of another CA is refused; a restarted peer is reached again", async () => {
  const [pa, pb] = await freePorts(2);
  const peers = { d: `127.0.0.1:${pa}`, e: `127.0.0.1:${pb}` };
  const d = await startTransport("d", pa!, peers);
  const foreign = await startTransport("e", pb!, peers, createClusterCa());
  d.transport.send([message("d", "e", 1)]);
  foreign.transport.send([message("e", "d", 1)]);
  await new Promise((resolve) => setTimeout(resolve, 500));
  assert.equal(d.handler.received.length, 0);
  assert.equal(foreign.handler.received.length, 0);
  await foreign.transport.stop();

  const e = await startTransport("e", pb!, peers);
  await eventually(
    () => {
      d.transport.send([message("d", "e", 2)]);
      return e.handler.received.length > 0;
    },
    "a message at the restarted peer",
    5_000,
  );
  assert.equal(e.handler.received[0]!.from, "d");
});

test("stop is bounded while a connection stays open and silent", async () => {
  const [pa] = await freePorts(1);
  const { transport } = await startTransport("a", pa!, { a: `127.0.0.1:${pa}` });
  const { connect } = await import("node:net");
  const socket = connect(pa!, "127.0.0.1");
  socket.on("error", () => undefined);
  await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
  try {
    const startedMs = performance.now();
    const stopped = await Promise.race([transport.stop().then(() => true), new Promise<false>((resolve) => setTimeout(() => resolve(false), 5_000).unref())]);
    assert.ok(stopped, "stop resolved within 5 s");
    assert.ok(performance.now() - startedMs < 2_000, `stop took ${Math.round(performance.now() - startedMs)} ms`);
  } finally {
    socket.destroy();
  }
});

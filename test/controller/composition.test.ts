/**
 * The composition root's components: the HTTP tests start the controller through `startController`
 * with the scheduler, the daemon gateway's listener and the audit pruner off; everything else is the
 * same assembly as a full controller.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { connect } from "node:net";
import { startInProcessController, type InProcessTestController } from "../support/controller.js";
import { startTestApp, type TestApp } from "../support/http-app.js";
import { unusedPort } from "../support/ports.js";

/** Resolves with the connection error code, or "connected". */
function tryConnect(port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve("connected");
    });
    socket.once("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
}

const routeList = (routes: readonly { def: { method: string; path: string } }[]) => routes.map((r) => `${r.def.method.toUpperCase()} ${r.def.path}`).sort();

describe("controller components", () => {
  let full: InProcessTestController;
  let reduced: TestApp;
  let reducedGrpcPort: number;

  before(async () => {
    full = await startInProcessController({}, { login: false });
    reducedGrpcPort = await unusedPort();
    reduced = await startTestApp({ config: { grpc: { port: reducedGrpcPort } } });
  });
  after(async () => {
    await reduced?.close();
    await full?.stop();
  });

  it("runs everything by default: the scheduler, the daemon gateway's port, the announced addresses", async () => {
    const { controller } = full;
    assert.ok(controller.scheduler.isRunning());
    assert.ok(controller.grpcPort > 0);
    assert.equal(await tryConnect(controller.grpcPort), "connected");
    const advertised = controller.services.cluster.advertised();
    assert.equal(advertised.grpcAddr, `127.0.0.1:${controller.grpcPort}`);
    assert.equal(advertised.restAddr, `127.0.0.1:${new URL(controller.httpUrl).port}`);
  });

  it("with the background components off binds no gRPC port, schedules nothing, announces nothing and is ready", async () => {
    assert.equal(await tryConnect(reducedGrpcPort), "ECONNREFUSED");
    assert.equal(reduced.cluster.advertised().grpcAddr, "");
    assert.equal(reduced.cluster.advertised().restAddr, "");
    const res = await reduced.request("GET", "/api/v1/system/ready");
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.status, "READY");
    // A group start needs the scheduler to own the group: here nobody does.
    const admin = await reduced.tokenFor("ADMIN");
    assert.equal((await reduced.request("POST", "/api/v1/groups", { token: admin, body: { name: "lobby", platform: "paper" } })).status, 201);
    const start = await reduced.request("POST", "/api/v1/groups/lobby/start", { token: admin });
    assert.equal(start.status, 409, start.text);
    assert.equal(start.json.error.code, "NOT_OWNER");
    assert.deepEqual(await reduced.instances.list({ group: "lobby" }), []);
  });

  it("mounts the same routes in the HTTP tests as in a full controller", () => {
    assert.deepEqual(routeList(reduced.registry.routes), routeList(full.controller.registry.routes));
    assert.ok(reduced.registry.routes.length > 50, `${reduced.registry.routes.length} routes`);
  });
});

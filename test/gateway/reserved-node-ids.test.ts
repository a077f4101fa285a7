// A daemon may not join under a controller's name: member ids (`ctl-…`) and the controllers'
// certificate name are refused, whether asked for or bound to the token, and the token stays unused.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { isReservedNodeId } from "../../src/gateway/join-service.js";
import { cleanupDirs, createToken, rawJoin, startGatewayController, type GatewayController } from "./harness.js";

describe("reserved node ids", { timeout: 60_000 }, () => {
  let c: GatewayController;
  before(async () => {
    c = await startGatewayController();
  });
  after(async () => {
    await c.stop();
    cleanupDirs();
  });

  it("knows the controllers' names", () => {
    assert.equal(isReservedNodeId("ctl-0123456789ab"), true);
    assert.equal(isReservedNodeId("cloud-controller"), true);
    assert.equal(isReservedNodeId("node-1"), false);
  });

  for (const requested of ["ctl-0123456789ab", "cloud-controller"]) {
    it(`refuses a join as ${requested} and leaves the token unused`, async () => {
      const { token } = await createToken(c);
      const refused = await rawJoin(c.grpcAddress, { token, node_id: requested });
      assert.ok(refused.error, "refused");
      assert.match(refused.error.details, /reserved for controllers/);
      const joined = await rawJoin(c.grpcAddress, { token, node_id: "node-after-refusal" });
      assert.equal(joined.response?.node_id, "node-after-refusal", "the token still works for a proper id");
    });
  }

  it("refuses a token bound to a controller's name", async () => {
    const { token } = await createToken(c, { nodeId: "ctl-aaaaaaaaaaaa" });
    const refused = await rawJoin(c.grpcAddress, { token });
    assert.match(refused.error?.details ?? "", /reserved for controllers/);
  });
});

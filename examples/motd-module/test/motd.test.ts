// The example module's own tests (`node --import tsx --test examples/motd-module/test/*.test.ts`): its
// routes through the SDK's harness, in memory.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { startModuleHarness } from "../../../src/sdk/module/index.js";
import { MotdModule } from "../src/index.js";

describe("motd module", () => {
  it("answers the default message, sets a new one, keeps the history and publishes MOTD:CHANGED", async () => {
    const harness = await startModuleHarness(MotdModule, { moduleId: "motd", version: "1.0.0" });
    assert.equal((await harness.request("GET", "message")).json().text, "Welcome to the network!");
    const set = await harness.request("PUT", "message", { text: "Event tonight" }, { "x-user-id": "alice" });
    assert.equal(set.status, 200);
    assert.deepEqual(harness.published, [{ type: "MOTD:CHANGED", payload: { text: "Event tonight", setBy: "alice" } }]);
    await harness.request("PUT", "message", { text: "Maintenance at 5" });
    const history = (await harness.request("GET", "history")).json();
    assert.deepEqual(
      history.map((m: { text: string }) => m.text),
      ["Event tonight"],
    );
    assert.equal((await harness.request("GET", `history/${history[0].id}`)).json().text, "Event tonight");
    await harness.stop();
  });

  it("refuses bad input the way the controller answers it", async () => {
    const harness = await startModuleHarness(MotdModule, { moduleId: "motd" });
    assert.deepEqual((await harness.request("PUT", "message", { text: "" })).json(), {
      error: "invalid json body",
      details: "text must be a non-blank string",
    });
    assert.equal((await harness.request("GET", "history?limit=0")).status, 422);
    assert.equal((await harness.request("GET", "history/nope")).status, 404);
    assert.equal((await harness.request("GET", "nothing")).status, 404);
  });

  it("lists the groups created since it started and counts views", async () => {
    const harness = await startModuleHarness(MotdModule, { moduleId: "motd" });
    await harness.emit("GROUP_CREATED", { groupName: "lobby" });
    assert.ok((await harness.request("GET", "groups-seen")).json().groups.includes("lobby"));
    assert.equal((await harness.request("POST", "views")).json().views, 1);
    assert.equal((await harness.request("POST", "views")).json().views, 2);
  });
});

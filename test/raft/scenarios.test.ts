// Runs every datadriven scenario under test/raft/testdata as its own test.
// RAFT_REWRITE=1 regenerates the expected outputs.
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { runDataDriven } from "./datadriven.js";
import { InteractionEnv } from "./interaction-env.js";

const dir = join(import.meta.dirname, "testdata");
const only = process.env.RAFT_SCENARIO;

describe("raft scenarios", () => {
  for (const file of readdirSync(dir)
    .filter((f) => f.endsWith(".txt"))
    .sort()) {
    if (only !== undefined && !file.includes(only)) continue;
    it(file, () => {
      const env = new InteractionEnv();
      runDataDriven(join(dir, file), (command) => env.handle(command));
    });
  }
});

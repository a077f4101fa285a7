// Every write the embedded store acknowledged survives kill -9 of the process that made it, and
// the secondary index agrees with the documents afterwards.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { it } from "node:test";
import { openLevelDocumentStore } from "../../src/store/embedded/level-document-store.js";
import type { Doc } from "../../src/store/ports.js";

const fixture = join(import.meta.dirname, "fixtures", "write-until-killed.ts");
const acksBeforeKill = 300;
const childTimeoutMs = 30_000;

/** Runs the writer, SIGKILLs it after `acksBeforeKill` acknowledged writes, returns every ack. */
async function writeThenKill(directory: string): Promise<{ acked: string[]; signal: NodeJS.Signals | null }> {
  const child = spawn(process.execPath, ["--import", "tsx", fixture, directory], { stdio: ["ignore", "pipe", "pipe"] });
  let buffered = "";
  let stderr = "";
  const acked: string[] = [];
  const timer = setTimeout(() => child.kill("SIGKILL"), childTimeoutMs);
  child.stderr.on("data", (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  child.stdout.on("data", (chunk: Buffer) => {
    buffered += chunk.toString();
    const lines = buffered.split("\n");
    buffered = lines.pop()!; // an unterminated line was not fully printed, so it is no ack
    acked.push(...lines);
    if (acked.length >= acksBeforeKill && child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  });
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.once("close", (c, s) => resolve([c, s])));
  clearTimeout(timer);
  assert.equal(code, null, `writer exited by itself (code ${code}):\n${stderr}`);
  return { acked, signal };
}

it("acknowledged embedded writes survive SIGKILL and indexes stay consistent", { timeout: 60_000 }, async () => {
  const directory = await mkdtemp(join(tmpdir(), "crash-"));
  try {
    const { acked, signal } = await writeThenKill(directory);
    assert.equal(signal, "SIGKILL");
    assert.ok(acked.length >= acksBeforeKill, `only ${acked.length} acks before the kill`);

    const store = await openLevelDocumentStore({ directory, ttlSweepIntervalMs: 0 });
    try {
      const acks = store.collection<Doc>("acks", { indexes: [{ name: "acks_group", field: "group" }] });
      const all = await acks.find();
      const present = new Set(all.map((d) => d._id));
      const missing = acked.filter((id) => !present.has(id));
      assert.deepEqual(missing, [], `${missing.length} acknowledged writes lost`);
      // Whatever was in flight is all-or-nothing: the index lists exactly the stored documents.
      const groups = new Set(all.map((d) => String(d.group)));
      let viaIndex = 0;
      for (const group of groups) {
        const found = await acks.find({ group });
        assert.deepEqual(
          found.map((d) => d._id),
          all.filter((d) => d.group === group).map((d) => d._id),
          `index entries of ${group}`,
        );
        viaIndex += found.length;
      }
      assert.equal(viaIndex, all.length);
    } finally {
      await store.close();
    }
  } finally {
    await rm(directory, { recursive: true, force: true });
  }
});

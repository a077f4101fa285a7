import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, describe, test } from "node:test";
import { checkBoundaries, maxFileLines } from "../../scripts/check-boundaries.js";

const repoRoot = join(import.meta.dirname, "..", "..");
const made: string[] = [];
after(() => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});

/** A small tree that keeps every rule: the clock, a store on floor 1, a scheduler on floor 6 and a daemon. */
function cleanTree(extra: Record<string, string> = {}): string {
  const root = mkdtempSync(join(tmpdir(), "house-rules-"));
  made.push(root);
  const tree: Record<string, string> = {
    "src/shared/clock.ts": "export const systemClock = { nowMs: () => Date.now() };\nexport const later = (f: () => void) => setTimeout(f, 1);\n",
    "src/store/ports.ts": 'import { systemClock } from "../shared/clock.js";\nexport const now = () => systemClock.nowMs();\n',
    "src/scheduler/tick.ts": 'import { now } from "../store/ports.js";\n// setTimeout(...) in a comment is not a call\nexport const tick = () => now();\n',
    "src/daemon/loop.ts": 'import { systemClock } from "../shared/clock.js";\nexport const spin = () => setInterval(() => systemClock.nowMs(), 1000);\n',
    ...extra,
  };
  for (const [path, text] of Object.entries(tree)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

const lines = (count: number) => Array.from({ length: count }, (_, i) => `export const v${i} = ${i};`).join("\n") + "\n";

describe("check-boundaries", () => {
  test("a clean tree passes", () => {
    assert.deepEqual(checkBoundaries(cleanTree()), []);
  });

  test("a file of 501 lines fails, naming the file, its line count and the limit; 500 lines pass", () => {
    assert.deepEqual(checkBoundaries(cleanTree({ "src/store/long.ts": lines(maxFileLines) })), []);
    const problems = checkBoundaries(cleanTree({ "src/store/long.ts": lines(maxFileLines + 1) }));
    assert.deepEqual(problems, ["src/store/long.ts: 501 lines; a file in src/ has at most 500"]);
  });

  test("an import going up the table fails", () => {
    // store/ is on floor 1, scheduler/ on floor 6.
    const problems = checkBoundaries(cleanTree({ "src/store/up.ts": 'import { tick } from "../scheduler/tick.js";\nexport const t = tick;\n' }));
    assert.equal(problems.length, 1);
    assert.match(problems[0]!, /^src\/store\/up\.ts: imports \.\.\/scheduler\/tick\.js; scheduler\/ \(floor 6\) is above store\/ \(floor 1\)$/);
  });

  test("an import sideways across rooms of one floor fails", () => {
    // scheduler/ and gateway/ are both on floor 6.
    const problems = checkBoundaries(cleanTree({ "src/gateway/side.ts": 'import type { tick } from "../scheduler/tick.js";\nexport type T = typeof tick;\n' }));
    assert.equal(problems.length, 1);
    assert.match(problems[0]!, /scheduler\/ is beside gateway\/ \(both on floor 6\)/);
  });

  test("the daemon imports only its own list, and no controller room imports the daemon", () => {
    const problems = checkBoundaries(
      cleanTree({
        "src/daemon/bad.ts": 'import { now } from "../store/ports.js";\nexport const n = now;\n',
        "src/scheduler/bad.ts": 'import { spin } from "../daemon/loop.js";\nexport const s = spin;\n',
      }),
    );
    assert.equal(problems.length, 2);
    assert.match(problems[0]!, /^src\/daemon\/bad\.ts: imports \.\.\/store\/ports\.js; daemon\/ imports only wire\//);
    assert.match(problems[1]!, /^src\/scheduler\/bad\.ts: imports \.\.\/daemon\/loop\.js; daemon\/ is a program of its own/);
  });

  test("a split room's sub-rooms import only sub-rooms below them: up, sideways and into the room's face fail", () => {
    // cluster/: raft-host/ and identity/ on floor 0, state/ on 1, ..., the room's own files (".") on top.
    const cluster = {
      "src/cluster/raft-host/host.ts": "export const host = 1;\n",
      "src/cluster/identity/ca.ts": "export const ca = 1;\n",
      "src/cluster/state/machine.ts":
        'import { host } from "../raft-host/host.js";\nimport { ca } from "../identity/ca.js";\nexport const machine = host + ca;\n',
      "src/cluster/cluster-service.ts": 'import { machine } from "./state/machine.js";\nexport const service = machine;\n',
    };
    assert.deepEqual(checkBoundaries(cleanTree(cluster)), []);
    const problems = checkBoundaries(
      cleanTree({
        ...cluster,
        "src/cluster/raft-host/up.ts": 'import { machine } from "../state/machine.js";\nexport const up = machine;\n',
        "src/cluster/identity/side.ts": 'import { host } from "../raft-host/host.js";\nexport const side = host;\n',
        "src/cluster/state/face.ts": 'import type { service } from "../cluster-service.js";\nexport type Face = typeof service;\n',
      }),
    );
    assert.deepEqual(problems, [
      "src/cluster/identity/side.ts: imports ../raft-host/host.js; cluster/raft-host/ is beside cluster/identity/ (both on floor 0 of cluster/)",
      "src/cluster/raft-host/up.ts: imports ../state/machine.js; cluster/state/ (floor 1 of cluster/) is above cluster/raft-host/ (floor 0)",
      "src/cluster/state/face.ts: imports ../cluster-service.js; cluster/ (floor 4 of cluster/) is above cluster/state/ (floor 1)",
    ]);
  });

  test("a sub-room missing from its room's table fails", () => {
    const problems = checkBoundaries(cleanTree({ "src/cluster/misc/a.ts": "export const a = 1;\n" }));
    assert.deepEqual(problems, ["src/cluster/misc/: a sub-room on no floor of cluster/; add it to SUB_FLOORS in scripts/check-boundaries.ts"]);
  });

  test("process.argv is read only in a program's main.ts and in cloudctl", () => {
    const read = "export const args = () => process.argv.slice(2);\n";
    assert.deepEqual(
      checkBoundaries(
        cleanTree({
          "src/controller/main.ts": read,
          "src/daemon/main.ts": read,
          "src/cli/program.ts": read,
          "src/scheduler/doc.ts": "// process.argv in a comment is not a read\nexport const d = 1;\n",
        }),
      ),
      [],
    );
    const problems = checkBoundaries(cleanTree({ "src/cluster/start.ts": `export const a = 1;\n${read}`, "src/config/load.ts": read }));
    assert.deepEqual(problems, [
      "src/cluster/start.ts:2: reads process.argv; only a program's main.ts and src/cli/ read the command line, the others take an option",
      "src/config/load.ts:1: reads process.argv; only a program's main.ts and src/cli/ read the command line, the others take an option",
    ]);
  });

  test("a room missing from the table fails", () => {
    const problems = checkBoundaries(cleanTree({ "src/newroom/a.ts": "export const a = 1;\n" }));
    assert.deepEqual(problems, ["src/newroom/: a room on no floor; add it to the table in scripts/check-boundaries.ts"]);
  });

  test("a raw timer or clock read in a controller room fails; the Clock file and the daemon may use them", () => {
    for (const call of [
      "setTimeout(() => undefined, 10)",
      "setInterval(() => undefined, 10)",
      "setImmediate(() => undefined)",
      "Date.now()",
      "performance.now()",
    ]) {
      const problems = checkBoundaries(cleanTree({ "src/scheduler/wait.ts": `export const wait = () => ${call};\n` }));
      const name = call.slice(0, call.indexOf("("));
      assert.deepEqual(problems, [`src/scheduler/wait.ts:1: raw ${name}() in a controller room; use the injected Clock (src/shared/clock.ts)`], call);
    }
    // A sleep of its own, even on the Clock: there is one, in src/shared/clock.ts.
    assert.deepEqual(
      checkBoundaries(cleanTree({ "src/scheduler/nap.ts": "export const sleep = (clock: { nowMs(): number }, ms: number) => [clock, ms];\n" })),
      ["src/scheduler/nap.ts:1: a sleep of its own; use sleep(clock, ms) of src/shared/clock.ts"],
    );
    // clock.setTimeout(...) is the injected Clock, not a raw timer.
    assert.deepEqual(
      checkBoundaries(
        cleanTree({
          "src/scheduler/ok.ts": "export const wait = (clock: { setTimeout(f: () => void, ms: number): void }) => clock.setTimeout(() => undefined, 10);\n",
        }),
      ),
      [],
    );
  });

  test("an import cycle fails", () => {
    const problems = checkBoundaries(
      cleanTree({
        "src/store/a.ts": 'import { b } from "./b.js";\nexport const a = () => b;\n',
        "src/store/b.ts": 'import { a } from "./a.js";\nexport const b = () => a;\n',
      }),
    );
    assert.deepEqual(problems, ["import cycle: src/store/a.ts <-> src/store/b.ts"]);
  });

  test("the repository's own tree breaks no rule", () => {
    assert.deepEqual(checkBoundaries(repoRoot), []);
  });
});

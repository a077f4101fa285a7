// A template export from the Raft leader of three production controllers (real PostgreSQL and
// Redis, the default Raft timing: 100 ms ticks, an election after 1 to 2 s without the leader) does
// not cost the leader its leadership: a 48 MiB template (12 files, most of them random bytes) is
// imported through the leader and exported from it twice while every controller's leader id is
// sampled every 100 ms; no controller names another leader, no term moves, and the leader's
// event-loop delay (its /metrics) stays under the 1 s election timeout. A stall longer than the
// election timeout is then made on purpose (SIGSTOP of the leader for 3 s) to show that the same
// watch sees it: the leader changes and the term grows.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { exportTemplateArchive, importTemplateArchive, writeTemplateArchive } from "../../scripts/bench/archive-support.js";
import { LeaderSampler, LoopDelayScraper, raftTerms, startProductionTrio, waitForAgreedLeader, type ProductionTrio } from "../../scripts/bench/leader-watch.js";
import type { ClusterMemberProcess } from "./cluster-harness.js";

/** The smallest election timeout of a controller: 10 ticks of 100 ms. */
const ELECTION_TIMEOUT_MS = 1_000;
const TEMPLATE_BYTES = 48 * 1024 * 1024;
const TEMPLATE_FILES = 12;
const SAMPLE_MS = 100;
/** Longer than the largest randomized election timeout (2 s). */
const STALL_MS = 3_000;

describe("an export from the Raft leader of three production controllers", { timeout: 300_000 }, () => {
  let dir: string;
  let trio: ProductionTrio;
  let leader: ClusterMemberProcess;
  let leaderId: string;
  let hash: string;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "cloud-leader-export-"));
    const archivePath = join(dir, "template.tar.gz");
    const [fileBytes, started] = await Promise.all([writeTemplateArchive(archivePath, TEMPLATE_BYTES, TEMPLATE_FILES), startProductionTrio()]);
    trio = started;
    leaderId = await waitForAgreedLeader(trio.members);
    leader = trio.memberById(leaderId)!;
    ({ hash } = await importTemplateArchive(leader.process!.url, leader.process!.adminToken, "leader-export", archivePath, fileBytes));
  });
  after(async () => {
    await trio?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("keeps the leader and the term, with the leader's loop delay under the election timeout", async (t) => {
    const { url, adminToken } = leader.process!;
    const termsBefore = await raftTerms(trio.members);
    const leaders = new LeaderSampler(trio.members, SAMPLE_MS);
    const loop = await LoopDelayScraper.start(url, SAMPLE_MS);
    assert.ok(loop, "the leader's /metrics shows nodejs_eventloop_lag gauges");
    const exported: { bytes: number; ms: number }[] = [];
    try {
      for (let i = 0; i < 2; i++) {
        const startedMs = Date.now();
        const { bytes } = await exportTemplateArchive(url, adminToken, "leader-export", hash);
        exported.push({ bytes, ms: Date.now() - startedMs });
      }
      await sleep(500); // a late election would show within the next samples
    } finally {
      await loop.stop();
      await leaders.stop();
    }
    const termsAfter = await raftTerms(trio.members);
    const seen = leaders.summary();
    const delay = loop.summary();
    t.diagnostic(
      `exports ${exported.map((e) => `${(e.bytes / 1048576).toFixed(1)} MiB in ${e.ms} ms`).join(", ")}; leader loop delay max ${delay.maxMs.toFixed(1)} ms over ${delay.scrapes} scrapes; ${seen.samples} leader samples; terms ${JSON.stringify(termsAfter)}`,
    );

    assert.ok(
      exported.every((e) => e.bytes > TEMPLATE_BYTES / 2),
      `whole archives exported: ${JSON.stringify(exported)}`,
    );
    assert.ok(seen.samples >= 3 * 5, `leader samples taken: ${seen.samples}`);
    assert.equal(seen.failed, 0, "every controller answered every sample");
    assert.deepEqual(seen.leaders, [leaderId], "every controller named the one leader throughout");
    assert.equal(seen.withoutLeader, 0);
    assert.equal(seen.changes, 0);
    assert.deepEqual(termsAfter, termsBefore, "no controller's Raft term moved");
    assert.ok(delay.scrapes >= 5, `loop delay scrapes: ${delay.scrapes}`);
    assert.ok(delay.maxMs < ELECTION_TIMEOUT_MS, `the leader's loop delay stayed under the election timeout: max ${delay.maxMs} ms`);
  });

  it("sees a leader stalled longer than the election timeout lose its leadership", async () => {
    const termsBefore = await raftTerms(trio.members);
    const leaders = new LeaderSampler(trio.members, SAMPLE_MS);
    try {
      await sleep(3 * SAMPLE_MS);
      process.kill(leader.process!.pid, "SIGSTOP");
      try {
        await sleep(STALL_MS);
      } finally {
        process.kill(leader.process!.pid, "SIGCONT");
      }
      const newLeader = await waitForAgreedLeader(trio.members, 30_000);
      assert.notEqual(newLeader, leaderId);
      await sleep(3 * SAMPLE_MS);
    } finally {
      await leaders.stop();
    }
    const termsAfter = await raftTerms(trio.members);
    assert.ok(leaders.summary().changes >= 2, `the two other controllers named a new leader: ${JSON.stringify(leaders.summary())}`);
    for (const m of trio.members)
      assert.ok(termsAfter[m.name]! > termsBefore[m.name]!, `${m.name}'s term grew: ${termsBefore[m.name]} -> ${termsAfter[m.name]}`);
  });
});

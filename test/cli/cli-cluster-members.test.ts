// cloudctl cluster with several real controller processes (test/e2e/cluster-harness.ts): a join
// token made with the CLI lets a second controller join; `cluster leave` sent to that controller
// (flags override the context) removes it and it shuts down; a third joins and is killed, so the
// survivor has no quorum: `cluster eject` then fails (503, exit 1, sent once) and
// `cluster recover --eject` makes the survivor the only member.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ClusterHarness, type ClusterMemberProcess } from "../e2e/cluster-harness.js";
import { eventually } from "../support/wait.js";
import { homeWithContext, runCli, type CliResult } from "./harness.js";

function ok(result: CliResult): CliResult {
  assert.equal(result.code, 0, `exit ${result.code}\nstdout: ${result.stdout}\nstderr: ${result.stderr}`);
  return result;
}

interface Member {
  nodeId: string;
  role: string;
  gRPCAddr: string;
}

describe("cloudctl cluster with several controller processes", { timeout: 600_000 }, () => {
  const harness = new ClusterHarness();
  let a: ClusterMemberProcess;
  let home: string;
  let disposeHome = () => {};
  let clusterId: string;
  const cli = (args: string[]) => runCli(args, { home });
  const membersOf = async (m: ClusterMemberProcess) => (await m.call("GET", "/api/v1/cluster/members")).json.members as Member[];
  const untilVoters = (count: number) =>
    eventually(
      async () => {
        const members = await membersOf(a);
        return members.length === count && members.every((m) => m.role === "voter" && m.gRPCAddr !== "") ? members : null;
      },
      `${count} voters`,
      60_000,
    );
  const joinWithCliToken = async (name: string): Promise<{ member: ClusterMemberProcess; nodeId: string }> => {
    const created = ok(await cli(["cluster", "join-token", "create", "--join-addr", a.grpcAddr, "--label", name, "--json"]));
    const member = await harness.start(name, { joinToken: JSON.parse(created.stdout).token });
    return { member, nodeId: (await member.call("GET", "/api/v1/cluster")).json.nodeId };
  };

  before(async () => {
    a = await harness.start("a");
    clusterId = (await a.call("GET", "/api/v1/cluster")).json.clusterId;
    ({ home, dispose: disposeHome } = homeWithContext(a.process!.url, a.process!.adminToken));
  });
  after(async () => {
    await harness.close();
    disposeHome();
  });

  test("a token from `join-token create` joins a controller; `leave` sent to it removes it and it stops", async () => {
    const { member: b, nodeId } = await joinWithCliToken("b");
    await untilVoters(2);
    const [members, status] = await Promise.all([cli(["cluster", "members"]), cli(["cluster", "status"])]);
    // A voting member: the table says `leader` for the one that leads (an election may move it to the newcomer).
    assert.match(ok(members).stdout, new RegExp(`${nodeId}\\s+(voter|leader)\\s+`));
    assert.match(ok(status).stdout, /Members\s+2\n/);

    const left = ok(await cli(["cluster", "leave", "--yes", "--json", "--controller", b.process!.url, "--token", b.process!.adminToken]));
    assert.deepEqual(JSON.parse(left.stdout), { nodeId, clusterId });
    await eventually(() => b.process!.output().includes("Controller stopped"), "the controller that left stops by itself", 30_000);
    await eventually(async () => (await a.call("GET", "/api/v1/cluster")).json.memberCount === 1, "one member left", 30_000);
  });

  test("without quorum eject fails once with 503 (exit 1); recover --eject makes the survivor the only member", async () => {
    const { member: c, nodeId } = await joinWithCliToken("c");
    await untilVoters(2);
    await harness.kill9(c);

    const eject = await cli(["cluster", "eject", nodeId, "--yes", "--reason", "lost", "--verbose"]);
    assert.equal(eject.code, 1, eject.stderr);
    assert.match(eject.stderr, /HTTP 503/);
    assert.equal(eject.stderr.match(/^> DELETE /gm)?.length, 1, "a DELETE is never retried");

    const recovered = ok(await cli(["cluster", "recover", "--eject", nodeId, "--reason", "host lost", "--yes", "--json"]));
    assert.deepEqual(JSON.parse(recovered.stdout), {
      clusterId,
      nodeId: (await a.call("GET", "/api/v1/cluster")).json.nodeId,
      ejected: [nodeId],
      memberCount: 1,
    });
    await eventually(
      async () => {
        const record = (await a.call("GET", "/api/v1/cluster")).json;
        return record.memberCount === 1 && record.leaderId === record.nodeId;
      },
      "the survivor leads alone",
      60_000,
    );
    const status = ok(await cli(["cluster", "status"]));
    assert.match(status.stdout, /Members\s+1\n/);
    assert.match(status.stdout, new RegExp(`Cluster\\s+${clusterId}`));
  });
});

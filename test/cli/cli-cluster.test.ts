// cloudctl cluster against a real controller (in this process; the development profile runs a
// single-member Raft cluster): status and members (`--json` is the controller's body), join
// tokens (create, list without values, revoke, the controller's 400/404/409 as exit codes), seed
// rotation with and without confirmation, and what a lone member refuses: eject of itself or of
// an unknown id, leave, recover. `recover --i-have-only-survivor` only prints.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { startInProcessController, type InProcessTestController } from "../support/controller.js";
import {} from "../gateway/harness.js";
import { eventually } from "../support/wait.js";
import { homeWithContext, runCli, runOnTerminal, type CliResult } from "./harness.js";

function ok(result: CliResult): CliResult {
  assert.equal(result.code, 0, `exit ${result.code}\nstdout: ${result.stdout}\nstderr: ${result.stderr}`);
  return result;
}

function failed(result: CliResult, code: number, pattern: RegExp): void {
  assert.equal(result.code, code, `stdout: ${result.stdout}\nstderr: ${result.stderr}`);
  assert.match(result.stderr, pattern);
}

describe("cloudctl cluster on a single-member controller", { timeout: 240_000 }, () => {
  let controller: InProcessTestController;
  let home: string;
  let disposeHome = () => {};
  let selfId: string;
  const cli = (args: string[], stdin?: string) => runCli(args, { home, stdin });
  const get = async (path: string) => {
    const res = await fetch(`${controller.url}${path}`, { headers: { authorization: `Bearer ${controller.adminToken}` } });
    return { status: res.status, text: await res.text() };
  };
  const auditActions = async () => (JSON.parse((await get("/api/v1/audit?pageSize=100")).text).data as { action: string }[]).map((r) => r.action);

  before(async () => {
    controller = await startInProcessController();
    ({ home, dispose: disposeHome } = homeWithContext(controller.url, controller.adminToken));
    selfId = JSON.parse((await get("/api/v1/cluster")).text).nodeId;
    // The member's REST and gRPC addresses are filled in once the controller listens.
    await eventually(async () => JSON.parse((await get("/api/v1/cluster/members")).text).members[0]?.gRPCAddr !== "", "member addresses known");
  });
  after(async () => {
    await controller?.stop();
    disposeHome();
  });

  test("status and members: --json prints the controller's body, the tables name the leader", async () => {
    const [statusJson, membersJson, status, members] = await Promise.all([
      cli(["cluster", "status", "--json"]),
      cli(["cluster", "members", "--json"]),
      cli(["cluster", "status"]),
      cli(["cluster", "members"]),
    ]);
    assert.equal(ok(statusJson).stdout, `${(await get("/api/v1/cluster")).text}\n`);
    assert.equal(ok(membersJson).stdout, `${(await get("/api/v1/cluster/members")).text}\n`);
    assert.match(ok(status).stdout, /Members\s+1\n/);
    assert.match(status.stdout, new RegExp(`Leader\\s+${selfId}`));
    assert.match(status.stdout, /Config version\s+none/);
    assert.match(ok(members).stdout, /NODE ID\s+ROLE\s+LABEL\s+RAFT\s+REST\s+GRPC\s+JOINED/);
    assert.match(members.stdout, new RegExp(`${selfId}\\s+leader\\s+`));
  });

  test("join tokens: create shows the value once, list never, revoke; the controller's refusals become exit codes", async () => {
    const grpcAddr = JSON.parse((await get("/api/v1/cluster/members")).text).members[0].gRPCAddr as string;
    const before = await auditActions();
    failed(await cli(["cluster", "join-token", "create"]), 1, /at least one --join-addr/);
    assert.equal(
      (await auditActions()).filter((a) => a === "cluster.join_token.issued").length,
      before.filter((a) => a === "cluster.join_token.issued").length,
      "nothing was sent",
    );

    const created = JSON.parse(
      ok(await cli(["cluster", "join-token", "create", "--join-addr", grpcAddr, "--ttl-seconds", "600", "--label", "from-cli", "--json"])).stdout,
    );
    assert.deepEqual(Object.keys(created).sort(), ["expiresAt", "jti", "token"]);
    const lifetimeMs = Date.parse(created.expiresAt) - Date.now();
    assert.ok(lifetimeMs > 500_000 && lifetimeMs <= 600_000, `--ttl-seconds 600 sent (expires in ${lifetimeMs} ms)`);
    const human = ok(await cli(["cluster", "join-token", "create", "--join-addr", grpcAddr, "--join-addr", "10.0.0.2:9090"]));
    assert.match(human.stdout, /Token\s+\S+/);
    assert.match(human.stderr, /not shown again/);

    const [list, listJson, badTtl, badAddr] = await Promise.all([
      cli(["cluster", "join-token", "list"]),
      cli(["cluster", "join-token", "ls", "--json"]),
      cli(["cluster", "join-token", "create", "--join-addr", grpcAddr, "--ttl-seconds", String(31 * 86_400)]),
      cli(["cluster", "join-token", "create", "--join-addr", "no-port"]),
    ]);
    assert.match(ok(list).stdout, new RegExp(`${created.jti}\\s+from-cli\\s+ACTIVE`));
    assert.ok(!list.stdout.includes(created.token) && !listJson.stdout.includes(created.token), "the value is never listed");
    assert.equal(ok(listJson).stdout, `${(await get("/api/v1/cluster/join-tokens")).text}\n`);
    failed(badTtl, 1, /BAD_TTL, HTTP 400/);
    failed(badAddr, 1, /VALIDATION_ERROR, HTTP 422/);

    const revoked = ok(await cli(["cluster", "join-token", "revoke", created.jti, "--json"]));
    assert.equal(revoked.stdout, "{}\n", "204 prints {}");
    const [again, unknown] = await Promise.all([
      cli(["cluster", "join-token", "revoke", created.jti]),
      cli(["cluster", "join-token", "revoke", "no-such-jti"]),
    ]);
    failed(again, 1, /JOIN_TOKEN_NOT_ACTIVE, HTTP 409/);
    failed(unknown, 4, /JOIN_TOKEN_NOT_FOUND, HTTP 404/);
  });

  test("seed rotate asks first (No changes nothing), then invalidates every outstanding token", async () => {
    const grpcAddr = JSON.parse((await get("/api/v1/cluster/members")).text).members[0].gRPCAddr as string;
    const { jti } = JSON.parse(ok(await cli(["cluster", "join-token", "create", "--join-addr", grpcAddr, "--json"])).stdout);
    const statusOf = async () =>
      (JSON.parse((await get("/api/v1/cluster/join-tokens")).text).tokens as { jti: string; status: string }[]).find((t) => t.jti === jti)?.status;

    // A No on a terminal and a pipe nobody can answer (no --yes) both exit 6 with nothing done.
    const declined = await runOnTerminal(["cluster", "seed", "rotate"], { home, stdin: "n\n" });
    assert.equal(declined.code, 6, declined.stdout);
    assert.match(declined.stdout, /Rotate the cluster seed\?[\s\S]*cancelled: nothing was changed/);
    failed(await cli(["cluster", "seed", "rotate"], "y\n"), 6, /stdin is not a terminal.*Rotate the cluster seed\?.*--yes/);
    assert.equal(await statusOf(), "ACTIVE");

    const rotation = JSON.parse(ok(await cli(["cluster", "seed", "rotate", "--yes", "--json"])).stdout);
    assert.deepEqual(Object.keys(rotation).sort(), ["clusterId", "rotatedAt", "rotatedBy"]);
    assert.equal(rotation.rotatedBy, "admin");
    assert.equal(await statusOf(), "INVALIDATED");
  });

  test("a lone member: eject, leave and recover are refused with the controller's codes; --i-have-only-survivor only prints", async () => {
    const [unknownEject, selfEject, declinedEject, leave, unknownRecover, selfRecover, noEject, survivor] = await Promise.all([
      cli(["cluster", "eject", "ctl-000000000000", "--yes", "--reason", "gone"]),
      cli(["cluster", "eject", selfId, "--yes"]),
      runOnTerminal(["cluster", "eject", selfId], { home, stdin: "no\n" }),
      cli(["cluster", "leave", "--yes"]),
      cli(["cluster", "recover", "--eject", "ctl-000000000000", "--yes", "--reason", "lost"]),
      cli(["cluster", "recover", "--eject", `${selfId},`, "--yes"]),
      cli(["cluster", "recover", "--yes"]),
      cli(["cluster", "recover", "--i-have-only-survivor", "--eject", "ctl-000000000000", "--yes"]),
    ]);
    failed(unknownEject, 4, /MEMBER_NOT_FOUND, HTTP 404/);
    failed(selfEject, 1, /CANNOT_EJECT_SELF, HTTP 409/);
    assert.equal(declinedEject.code, 6, declinedEject.stdout);
    assert.match(declinedEject.stdout, /Eject controller[\s\S]*cancelled: nothing was changed/);
    failed(leave, 1, /LAST_MEMBER, HTTP 409/);
    failed(unknownRecover, 4, /MEMBER_NOT_FOUND, HTTP 404/);
    failed(selfRecover, 1, /CANNOT_EJECT_SELF, HTTP 409/);
    failed(noEject, 1, /--eject/);
    assert.match(ok(survivor).stdout, /Single-survivor reset \(offline; this command changed nothing\)/);

    const actions = await auditActions();
    assert.ok(!actions.some((a) => a === "cluster.member.ejected" || a === "cluster.leave" || a === "cluster.recovered"), actions.join(", "));
    assert.equal(JSON.parse((await get("/api/v1/cluster")).text).memberCount, 1);
  });
});

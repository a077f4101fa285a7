// The join service over real gRPC on an in-process controller's gRPC port: the CA check before the
// token is sent, every refusal of a token (garbage, revoked, used, expired, invalidated, of
// another cluster), request checks, and the member-only calls refused without a member
// certificate. Joins here add learners that never run, so each test uses its own controller.
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import * as grpc from "@grpc/grpc-js";
import { createClusterCa, issueNodeCertificate } from "../../src/cluster/identity/ca.js";
import {
  callUnary,
  controllerServerName,
  fromGrpcError,
  loadClusterMembership,
  type ClusterMembershipClient,
  type JoinClusterRequest,
} from "../../src/cluster/peers/cluster-proto.js";
import { requestJoin, JoinRefusedError } from "../../src/cluster/membership/join-client.js";
import { readJoinTokenClaims, signJoinToken, newSeedSecret } from "../../src/cluster/identity/join-token.js";
import { createLogService } from "../../src/logs/logger.js";
import { startInProcessController, type InProcessTestController } from "../support/controller.js";

const logger = createLogService({ level: "ERROR", format: "JSON" }, { write: () => undefined }).logger("test");
let controller: InProcessTestController | null = null;
afterEach(async () => {
  await controller?.stop();
  controller = null;
});

async function start(): Promise<{ grpcAddr: string; call: (method: string, path: string, body?: unknown) => Promise<{ status: number; json: any }> }> {
  controller = await startInProcessController();
  const c = controller;
  return {
    grpcAddr: `127.0.0.1:${c.controller.grpcPort}`,
    call: async (method, path, body) => {
      const res = await fetch(c.url + path, {
        method,
        headers: { authorization: `Bearer ${c.adminToken}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, json: text ? JSON.parse(text) : undefined };
    },
  };
}

const joinRequest = (token: string, nodeId = "ctl-aaaaaaaaaaaa"): JoinClusterRequest => ({
  token,
  node_id: nodeId,
  label: "test",
  raft_addr: "127.0.0.1:1",
  rest_addr: "",
  grpc_addr: "",
  hosts: [],
});

async function issue(call: Awaited<ReturnType<typeof start>>["call"], grpcAddr: string, body: object = {}): Promise<string> {
  const reply = await call("POST", "/api/v1/cluster/join-tokens", { joinAddrs: [grpcAddr], ...body });
  assert.equal(reply.status, 201, JSON.stringify(reply.json));
  return reply.json.token;
}

async function refusal(grpcAddr: string, token: string, nodeId?: string): Promise<string> {
  const claims = readJoinTokenClaims(token)!;
  try {
    await requestJoin([grpcAddr], joinRequest(token, nodeId), claims, 10_000, logger);
  } catch (err) {
    assert.ok(err instanceof JoinRefusedError, String(err));
    return err.message;
  }
  throw new Error("the join was not refused");
}

describe("cluster join service", { timeout: 120_000 }, () => {
  it("grants a join: the member certificate of the cluster CA, the material, the members; a repeated join of the same member is granted again", async () => {
    const { grpcAddr, call } = await start();
    const token = await issue(call, grpcAddr);
    const claims = readJoinTokenClaims(token)!;
    const { response } = await requestJoin([grpcAddr], joinRequest(token), claims, 10_000, logger);
    assert.equal(response.cluster_id, claims.cid);
    assert.equal(response.node_id, "ctl-aaaaaaaaaaaa");
    assert.match(response.certificate_pem, /BEGIN CERTIFICATE/);
    assert.match(response.ca_private_key_pem, /PRIVATE KEY/);
    assert.deepEqual(response.members.map((m) => m.node_id).sort(), [response.leader_id, "ctl-aaaaaaaaaaaa"].sort());
    const members = (await call("GET", "/api/v1/cluster/members")).json.members;
    assert.equal(members.find((m: any) => m.nodeId === "ctl-aaaaaaaaaaaa").role, "learner");
    const again = await requestJoin([grpcAddr], joinRequest(token), claims, 10_000, logger);
    assert.equal(again.response.node_id, "ctl-aaaaaaaaaaaa", "the same controller may repeat its join");
    assert.match(await refusal(grpcAddr, token, "ctl-bbbbbbbbbbbb"), /JOIN_TOKEN_USED/);
  });

  it("refuses garbage, revoked, expired, invalidated and foreign tokens, and changes nothing", async () => {
    const { grpcAddr, call } = await start();
    const good = await issue(call, grpcAddr);
    const claims = readJoinTokenClaims(good)!;

    const forged = signJoinToken({ ...claims, jti: claims.jti }, newSeedSecret());
    assert.match(await refusal(grpcAddr, forged), /JOIN_TOKEN_INVALID/);

    const revoked = await issue(call, grpcAddr);
    assert.equal((await call("DELETE", `/api/v1/cluster/join-tokens/${readJoinTokenClaims(revoked)!.jti}`)).status, 204);
    assert.match(await refusal(grpcAddr, revoked), /JOIN_TOKEN_REVOKED/);

    const shortLived = await issue(call, grpcAddr, { ttlSeconds: 1 });
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    assert.match(await refusal(grpcAddr, shortLived), /JOIN_TOKEN_EXPIRED/);

    assert.equal((await call("POST", "/api/v1/cluster/seed/rotate")).status, 200);
    assert.match(await refusal(grpcAddr, good), /\(JOIN_TOKEN_INVALIDATED\): Cluster join token was invalidated by a seed rotation/);

    const members = (await call("GET", "/api/v1/cluster/members")).json.members;
    assert.equal(members.length, 1, "no refused join added a member");
  });

  it("does not send the token to a controller whose CA is not the one the token names", async () => {
    const { grpcAddr, call } = await start();
    const token = await issue(call, grpcAddr);
    const claims = { ...readJoinTokenClaims(token)!, caf: "00".repeat(32) };
    await assert.rejects(requestJoin([grpcAddr], joinRequest(token), claims, 10_000, logger), /its cluster CA is not the one the join token names/);
    const tokens = (await call("GET", "/api/v1/cluster/join-tokens")).json.tokens;
    assert.equal(tokens[0].status, "ACTIVE", "the token was never sent");
    await assert.rejects(
      requestJoin(["127.0.0.1:1"], joinRequest(token), readJoinTokenClaims(token)!, 2_000, logger),
      /Could not join cluster .* through any join address/,
    );
  });

  it("checks the request, and refuses member-only calls without a member certificate", async () => {
    const { grpcAddr, call } = await start();
    const token = await issue(call, grpcAddr);
    const caPem = (await (async () => {
      const c = client(grpcAddr, grpc.credentials.createSsl(null, null, null, { rejectUnauthorized: false, checkServerIdentity: () => undefined }));
      try {
        return (await callUnary(c.GetClusterCa.bind(c), {}, 5_000)).ca_certificate_pem;
      } finally {
        c.close();
      }
    })()) as string;
    const anonymous = client(grpcAddr, grpc.credentials.createSsl(Buffer.from(caPem), null, null, { checkServerIdentity: () => undefined }));
    try {
      for (const [request, pattern] of [
        [joinRequest(token, "Not An Id"), /node_id/],
        [{ ...joinRequest(token), raft_addr: "nowhere" }, /raft_addr/],
        [{ ...joinRequest(token), label: "x".repeat(200) }, /label/],
        [joinRequest(""), /A cluster join token is required/],
      ] as const) {
        const error = await callUnary(anonymous.Join.bind(anonymous), request as JoinClusterRequest, 5_000).then(
          () => null,
          (err: grpc.ServiceError) => err,
        );
        assert.ok(error, `refused: ${JSON.stringify(request).slice(0, 80)}`);
        assert.match(fromGrpcError(error)!.message, pattern);
      }
      for (const invoke of [
        () => callUnary(anonymous.Propose.bind(anonymous), { command_json: "{}" }, 5_000),
        () => callUnary(anonymous.ChangeMembership.bind(anonymous), { request_json: "{}" }, 5_000),
        () => callUnary(anonymous.Status.bind(anonymous), {}, 5_000),
      ]) {
        const error = await invoke().then(
          () => null,
          (err: grpc.ServiceError) => err,
        );
        assert.equal(error?.code, grpc.status.PERMISSION_DENIED);
        assert.equal(fromGrpcError(error!)?.code, "NOT_A_MEMBER");
      }
      // A certificate of another CA is no member certificate either.
      const foreignCa = createClusterCa();
      const foreign = issueNodeCertificate(foreignCa, { nodeId: "ctl-cccccccccccc" });
      const stranger = client(
        grpcAddr,
        grpc.credentials.createSsl(Buffer.from(caPem), Buffer.from(foreign.keyPem), Buffer.from(foreign.certPem), { checkServerIdentity: () => undefined }),
      );
      const error = await callUnary(stranger.Status.bind(stranger), {}, 5_000).then(
        () => null,
        (err: grpc.ServiceError) => err,
      );
      stranger.close();
      assert.ok(error, "a foreign certificate is refused");
    } finally {
      anonymous.close();
    }
    assert.equal((await call("GET", "/api/v1/cluster/members")).json.members.length, 1);
  });
});

function client(address: string, credentials: grpc.ChannelCredentials): ClusterMembershipClient {
  const Client = loadClusterMembership();
  return new Client(address, credentials, { "grpc.ssl_target_name_override": controllerServerName }) as unknown as ClusterMembershipClient;
}

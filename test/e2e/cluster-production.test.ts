// Three controller processes on the production profile sharing one PostgreSQL database and one
// Redis (real servers on ephemeral ports) join one Raft cluster: the database is claimed by the
// cluster, every controller's gateway serves the one Raft-held cluster CA, a fresh controller
// without a join token is refused on that database, and with one controller killed the other two
// still commit.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import pg from "pg";
import type { ClusterHarness, ClusterMemberProcess } from "./cluster-harness.js";
import { productionCluster, type ProductionCluster } from "./production-cluster.js";
import { eventually } from "../support/wait.js";
import type { PostgresServer } from "../support/postgres-server.js";

describe("a production cluster on shared PostgreSQL and Redis", { timeout: 600_000 }, () => {
  let production: ProductionCluster;
  let postgres: PostgresServer;
  let harness: ClusterHarness;
  let a: ClusterMemberProcess;
  let b: ClusterMemberProcess;
  let c: ClusterMemberProcess;
  let clusterId: string;

  before(async () => {
    production = await productionCluster({ controllers: 3 });
    ({ postgres, harness } = production);
    [a, b, c] = production.members as [ClusterMemberProcess, ClusterMemberProcess, ClusterMemberProcess];
    clusterId = (await a.call("GET", "/api/v1/cluster")).json.clusterId;
  });
  after(async () => {
    await production?.stop();
  });

  it("all three are voters of one cluster, and the shared database names it", async () => {
    for (const member of [a, b, c]) {
      const record = (await member.call("GET", "/api/v1/cluster")).json;
      assert.equal(record.clusterId, clusterId);
      await eventually(async () => {
        const members = (await member.call("GET", "/api/v1/cluster/members")).json.members as any[];
        return members.length === 3 && members.every((m) => m.role === "voter");
      }, `three voters seen by ${member.name}`);
    }
    const client = new pg.Client({ connectionString: postgres.uri });
    await client.connect();
    try {
      const tables = (await client.query("select table_name from information_schema.tables where table_schema = current_schema()")).rows.map(
        (r) => r.table_name as string,
      );
      const metaTable = tables.find((t) => t.includes("cluster_meta"));
      assert.ok(metaTable, `a cluster_meta table among ${tables.join(", ")}`);
      const text = JSON.stringify((await client.query(`select * from "${metaTable}"`)).rows);
      assert.ok(text.includes(clusterId), text);
    } finally {
      await client.end();
    }
  });

  it("every controller's gRPC port serves the one cluster CA", async () => {
    const { loadClusterMembership, callUnary, controllerServerName } = await import("../../src/cluster/peers/cluster-proto.js");
    const grpc = await import("@grpc/grpc-js");
    const cas = new Set<string>();
    for (const member of [a, b, c]) {
      const Client = loadClusterMembership();
      const client = new Client(
        member.grpcAddr,
        grpc.credentials.createSsl(null, null, null, { rejectUnauthorized: false, checkServerIdentity: () => undefined }),
        {
          "grpc.ssl_target_name_override": controllerServerName,
        },
      ) as any;
      try {
        cas.add((await callUnary<object, { ca_certificate_pem: string }>(client.GetClusterCa.bind(client), {}, 10_000)).ca_certificate_pem);
      } finally {
        client.close();
      }
    }
    assert.equal(cas.size, 1);
  });

  it("a fresh controller without a join token is refused on the cluster's database", async () => {
    await assert.rejects(harness.start("stranger"), (err: Error) => {
      assert.match(err.message, new RegExp(`The database already belongs to cluster ${clusterId}; join it with a join token`));
      return true;
    });
  });

  it("with one of three killed the other two still commit and answer", async () => {
    await harness.kill9(c);
    const survivors = [a, b];
    await eventually(
      async () => (await survivors[0]!.call("POST", "/api/v1/cluster/join-tokens", { joinAddrs: [a.grpcAddr] })).status === 201,
      "a commit with two of three",
      30_000,
    );
    assert.equal((await survivors[1]!.call("POST", "/api/v1/cluster/seed/rotate")).status, 200);
  });
});

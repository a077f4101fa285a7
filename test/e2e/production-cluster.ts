// A production cluster for the e2e tests, started and stopped in one call: a real PostgreSQL and a
// real Redis (ephemeral ports), N controller processes on the production profile sharing them (the
// first founds the Raft cluster, each next joins through a token carrying the addresses of those
// before it), and optionally cloud-daemon processes, each with a node token issued on the first
// controller, waited for until every node is ONLINE. `stop()` stops the daemons, the controllers,
// Redis and PostgreSQL, in that order; a start that fails stops what it had started and throws.
import { ClusterHarness, type ClusterMemberProcess } from "./cluster-harness.js";
import { spawnDaemon, type DaemonProcess } from "../gateway/harness.js";
import type { ConfigOverrides } from "../support/config-overrides.js";
import { startPostgresServer, type PostgresServer } from "../support/postgres-server.js";
import { startRedisServer, type RedisServer } from "../support/redis-server.js";
import { eventually } from "../support/wait.js";

export interface ProductionClusterOptions {
  /** Controller processes (named a, b, c, ...). Default 3. */
  controllers?: number;
  /** controller.yml sections beyond the production profile, the database and the key-value store. */
  config?: ConfigOverrides;
  /** cloud-daemon processes to start once every controller runs. Default 0. */
  daemons?: number;
  /** daemon.yml keys of every daemon (maxMemoryMb, reconnectDelayMaxMs, ...). */
  daemonConfig?: Record<string, unknown>;
  /**
   * Daemon `i` knows every controller, in member order rotated to start at controller `i + offset`
   * (so daemons connect to different controllers first). Default 0: the first daemon starts on `a`.
   */
  daemonControllerOffset?: number;
  /** Bound of the wait for every daemon's node to be ONLINE. Default 60 s. */
  nodesOnlineWaitMs?: number;
}

export interface ProductionCluster {
  postgres: PostgresServer;
  redis: RedisServer;
  harness: ClusterHarness;
  /** The controllers, in start order. */
  members: ClusterMemberProcess[];
  /** The daemons, in start order. */
  daemons: DaemonProcess[];
  /** Ids of the daemons' nodes as the first controller lists them ONLINE (empty without daemons). */
  nodeIds: string[];
  /** Stops the daemons, the controllers (removing their directories), Redis and PostgreSQL. */
  stop(): Promise<void>;
}

/** Starts a production cluster; see the module comment. */
export async function productionCluster(options: ProductionClusterOptions = {}): Promise<ProductionCluster> {
  const controllerCount = options.controllers ?? 3;
  const daemonCount = options.daemons ?? 0;
  const daemons: DaemonProcess[] = [];
  let postgres: PostgresServer | undefined;
  let redis: RedisServer | undefined;
  let harness: ClusterHarness | undefined;
  const stop = async () => {
    for (const daemon of daemons) await daemon.stop();
    await harness?.close();
    await redis?.stop();
    await postgres?.stop();
  };
  try {
    const [startedPostgres, startedRedis] = await Promise.allSettled([startPostgresServer(), startRedisServer()]);
    if (startedPostgres.status === "fulfilled") postgres = startedPostgres.value;
    if (startedRedis.status === "fulfilled") redis = startedRedis.value;
    if (startedPostgres.status === "rejected") throw startedPostgres.reason;
    if (startedRedis.status === "rejected") throw startedRedis.reason;
    harness = new ClusterHarness({
      runtime: { profile: "production" },
      database: { uri: postgres!.uri },
      kvstore: { uri: redis!.uri },
      ...options.config,
    });
    const members: ClusterMemberProcess[] = [];
    for (let i = 0; i < controllerCount; i++) {
      const name = String.fromCharCode("a".charCodeAt(0) + i);
      const joinToken = i === 0 ? undefined : await harness.joinToken(members[i - 1]!, members);
      members.push(await harness.start(name, { joinToken }));
    }
    const [first] = members;
    const addresses = members.map((m) => m.grpcAddr);
    for (let i = 0; i < daemonCount; i++) {
      const token = (await first!.call("POST", "/api/v1/admin/tokens", {})).json.token as string;
      const start = (i + (options.daemonControllerOffset ?? 0)) % addresses.length;
      daemons.push(spawnDaemon([...addresses.slice(start), ...addresses.slice(0, start)], token, options.daemonConfig));
    }
    let nodeIds: string[] = [];
    if (daemonCount > 0)
      nodeIds = await eventually(
        async () => {
          const online = (await first!.call("GET", "/api/v1/nodes?state=ONLINE")).json as { id: string }[];
          return online.length === daemonCount ? online.map((n) => n.id) : null;
        },
        () =>
          `${daemonCount === 1 ? "the node" : `${daemonCount} nodes`} ONLINE${daemons.map((d, i) => `\n--- daemon ${i}\n${d.output().slice(-3_000)}`).join("")}`,
        options.nodesOnlineWaitMs ?? 60_000,
      );
    return { postgres: postgres!, redis: redis!, harness, members, daemons, nodeIds, stop };
  } catch (err) {
    await stop().catch(() => undefined);
    throw err;
  }
}

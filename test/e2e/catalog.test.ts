// The software catalog end to end: a real controller, a real `cloud-daemon`, a real local HTTP
// server as the builds' download source. A group takes the recommended build; its instance starts
// with the build at its jarFile (fetched by the daemon from the controller once, cached by sha256)
// and CLOUD_PLATFORM_VERSION in its environment. A wrong digest, a 404 and a stalled download each
// leave their group with a clear schedulingIssue, no instance, no crash and no crash-loop pause. A
// catalog change does not reach a running group: the revision froze the build.
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, readdirSync, readFileSync, readlinkSync } from "node:fs";
import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { INSTANCE_ENV } from "../../src/daemon/simulated-server/contract.js";
import {
  api,
  cleanupDirs,
  createToken,
  eventsOf,
  spawnDaemon,
  startGatewayController,
  type DaemonProcess,
  type GatewayController,
} from "../gateway/harness.js";
import { environOf, serverProcesses } from "../support/instance-processes.js";
import { eventually } from "../support/wait.js";

const waitMs = 60_000;
const sha = (data: Uint8Array) => createHash("sha256").update(data).digest("hex");

describe("catalog builds through a daemon", { timeout: 240_000 }, () => {
  const controllers: GatewayController[] = [];
  const daemons: DaemonProcess[] = [];
  const stalled: ServerResponse[] = [];
  let server: Server | null = null;
  after(async () => {
    for (const res of stalled) res.destroy();
    if (server) await new Promise<void>((resolve) => server!.close(() => resolve()));
    for (const d of daemons) await d.stop();
    for (const c of controllers) await c.stop();
    cleanupDirs();
  });

  it("starts the recommended build, refuses bad ones with a schedulingIssue and no crash loop, keeps the frozen build", async () => {
    const good = randomBytes(150_000);
    const requests = new Map<string, number>();
    server = createServer((req, res) => {
      requests.set(req.url!, (requests.get(req.url!) ?? 0) + 1);
      if (req.url === "/good.jar") return void res.end(good);
      if (req.url === "/tampered.jar") return void res.end(randomBytes(1000));
      if (req.url === "/slow.jar") {
        res.writeHead(200, { "content-length": "100000" });
        res.write(Buffer.alloc(100));
        stalled.push(res);
        return;
      }
      res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
    const source = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

    const controller = await startGatewayController({
      scheduler: { evaluationIntervalMs: 1_000 },
      config: { catalog: { stallTimeoutSeconds: 2, retryAfterSeconds: 600 } },
    });
    controllers.push(controller);
    const daemon = spawnDaemon([controller.grpcAddress], (await createToken(controller)).token, { maxMemoryMb: 2048 });
    daemons.push(daemon);
    await eventually(
      () => eventsOf(controller, "NODE_CONNECTED")[0],
      () => `daemon connected\n${daemon.output()}`,
      waitMs,
    );

    const add = async (version: string, path: string, digest: string, recommended = false) => {
      const res = await api(controller, "POST", "/api/v1/catalog/builds", {
        platform: "simulated",
        version,
        downloadUrl: `${source}${path}`,
        sha256: digest,
        recommended,
      });
      assert.equal(res.status, 201, JSON.stringify(res.json));
    };
    await add("1.0.0", "/good.jar", sha(good), true);
    await add("2.0.0", "/tampered.jar", "12".repeat(32));
    await add("3.0.0", "/gone.jar", "ab".repeat(32));
    await add("4.0.0", "/slow.jar", "cd".repeat(32));

    const createGroup = async (name: string, ports: number, platformVersion?: string) => {
      const res = await api(controller, "POST", "/api/v1/groups", {
        name,
        platform: "simulated",
        ...(platformVersion ? { platformVersion } : {}),
        scalingMode: "STATIC",
        minInstances: 1,
        maxInstances: 1,
        memoryMb: 64,
        portRange: { start: ports, end: ports + 9 },
      });
      assert.equal(res.status, 201, JSON.stringify(res.json));
      return res.json;
    };
    assert.equal((await createGroup("cgood", 29400)).platformVersion, "1.0.0", "the recommended build");
    const runningOf = (group: string) =>
      eventually(
        async () => {
          const list = (await api(controller, "GET", `/api/v1/services?group=${group}`)).json as { id: string; state: string }[];
          return list.find((r) => r.state === "RUNNING");
        },
        () => `${group} RUNNING\n${daemon.output().slice(-2000)}`,
        waitMs,
      );
    const instance = await runningOf("cgood");
    const pidOf = (id: string) =>
      eventually(
        () =>
          (serverProcesses().get(id) ?? []).find((pid) => {
            try {
              return readlinkSync(`/proc/${pid}/cwd`).startsWith(daemon.dir);
            } catch {
              return false;
            }
          }),
        `a process of ${id}`,
        waitMs,
      );
    const pid = await pidOf(instance.id);
    const workDir = readlinkSync(`/proc/${pid}/cwd`);
    assert.ok(readFileSync(join(workDir, "server.jar")).equals(good), "the build is the instance's jarFile");
    assert.equal(environOf(pid).get(INSTANCE_ENV.platformVersion), "1.0.0");
    const cacheDir = join(daemon.dataDir, "build-cache");
    assert.deepEqual(
      readdirSync(cacheDir).filter((name) => /^[0-9a-f]{64}$/.test(name)),
      [sha(good)],
      "cached by its sha256",
    );
    assert.equal(requests.get("/good.jar"), 1, "downloaded once, by the controller");

    await createGroup("cbad", 29410, "2.0.0");
    await createGroup("cgone", 29420, "3.0.0");
    await createGroup("cslow", 29430, "4.0.0");
    const issueOf = (group: string, code: string) => {
      let seen: unknown = null;
      return eventually(
        async () => {
          const g = (await api(controller, "GET", `/api/v1/groups/${group}`)).json;
          seen = g.schedulingIssue;
          return g.schedulingIssue?.code === code ? g : null;
        },
        () => `${group}: ${code} (last seen ${JSON.stringify(seen)})\n${controller.logs().slice(-3000)}`,
        waitMs,
      );
    };
    const bad = await issueOf("cbad", "BUILD_HASH_MISMATCH");
    assert.match(bad.schedulingIssue.message, /tampered\.jar has sha256 [0-9a-f]{64}, the catalog says/);
    const gone = await issueOf("cgone", "BUILD_DOWNLOAD_FAILED");
    assert.match(gone.schedulingIssue.message, /answered 404/);
    const slow = await issueOf("cslow", "BUILD_DOWNLOAD_TIMEOUT");
    assert.match(slow.schedulingIssue.message, /sent nothing for 2000 ms/);
    // A few more evaluations: still nothing placed, nothing crashed, nothing paused.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    for (const group of ["cbad", "cgone", "cslow"]) {
      const g = (await api(controller, "GET", `/api/v1/groups/${group}`)).json;
      assert.equal(g.paused, false, `${group} not paused`);
      assert.equal((await api(controller, "GET", `/api/v1/services?group=${group}`)).json.length, 0, `${group} has no instance`);
    }
    assert.equal(eventsOf(controller, "INSTANCE_CRASHED").length, 0, "no crash");
    assert.equal(eventsOf(controller, "GROUP_CRASH_LOOP").length, 0, "no crash loop");
    assert.equal(requests.get("/tampered.jar"), 1, "a failed download is not retried before retryAfterSeconds");
    // Each of the three groups' plans failed at least once (a download under way is not counted).
    const exposition = await (await fetch(`${controller.url}/metrics`)).text();
    const planningFailures = Number(/^cloud_composition_planning_failures_total (\S+)$/m.exec(exposition)?.[1]);
    assert.ok(planningFailures >= 3, `cloud_composition_planning_failures_total ${planningFailures}`);

    // The catalog changes 1.0.0: the running group's revision keeps the build it froze.
    const changed = await api(controller, "PATCH", "/api/v1/catalog/builds/simulated/1.0.0", {
      downloadUrl: `${source}/tampered.jar`,
      sha256: "ef".repeat(32),
    });
    assert.equal(changed.status, 200, JSON.stringify(changed.json));
    assert.equal((await api(controller, "POST", `/api/v1/services/${instance.id}/force-stop`)).status < 300, true);
    await eventually(async () => (await api(controller, "GET", `/api/v1/services/${instance.id}`)).json.state !== "RUNNING", "the instance stopped", waitMs);
    const again = await runningOf("cgood");
    const againPid = await pidOf(again.id);
    assert.ok(readFileSync(join(readlinkSync(`/proc/${againPid}/cwd`), "server.jar")).equals(good), "still the frozen build");
    assert.equal(requests.get("/good.jar"), 1);
    assert.ok(!existsSync(join(cacheDir, "ef".repeat(32))));
  });
});

// Template, crash and cluster commands against a fake controller: rollback and rendered tables.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { bodiesOf, homeWithContext, runCli, startFakeController, type FakeController } from "./harness.js";

const versions = [
  { templateName: "lobby", hash: "cccccccc3333", sizeBytes: 2048, createdAt: "2026-11-21T03:00:00Z" },
  { templateName: "lobby", hash: "bbbbbbbb2222", sizeBytes: 1024, createdAt: "2026-11-20T03:00:00Z" },
  { templateName: "lobby", hash: "aaaaaaaa1111", sizeBytes: 512, createdAt: "2026-11-19T03:00:00Z" },
];

describe("cloudctl template, crash and cluster commands", () => {
  let server: FakeController;
  const bodies = (method: string, path: string) => bodiesOf(server, method, path);
  before(async () => {
    server = await startFakeController((app) => {
      app.get("/api/v1/templates", (c) =>
        c.json([
          { name: "lobby", description: "Lobby world", platform: "paper", hash: "0123456789abcdef", sizeBytes: 1536 },
          { name: "tiny", description: "", platform: "paper", hash: "fedcba9876543210", sizeBytes: 999 },
          { name: "big", description: "maps", platform: "paper", hash: "ffffffffffffffff", sizeBytes: 5 * 1024 * 1024 + 512 * 1024 },
        ]),
      );
      app.get("/api/v1/templates/lobby/versions", (c) => c.json(versions));
      app.get("/api/v1/templates/fresh/versions", (c) => c.json([versions[0]]));
      app.post("/api/v1/templates/:name/rollback", async (c) => c.json({ status: "restored", hash: (await c.req.json()).hash }));
      app.get("/api/v1/groups", (c) =>
        c.json({
          data: [
            { name: "Lobby", maintenance: false, minInstances: 1, runningInstances: 2, totalPlayers: 5 },
            { name: "bedwars", maintenance: true, minInstances: 1, runningInstances: 1, totalPlayers: 40 },
            { name: "skywars", maintenance: false, minInstances: 2, runningInstances: 0, totalPlayers: 0 },
          ],
        }),
      );
      app.get("/api/v1/crashes", (c) => c.json([]));
      app.post("/api/v1/cluster/recover", async (c) => c.json({ ejected: (await c.req.json()).eject }));
    });
  });
  after(() => server.close());

  test("template rollback: --hash sends that hash; no flag picks the second newest version; the answer is printed", async () => {
    const { home, dispose } = homeWithContext(server.url);
    try {
      const [withHash, previous, json, none] = await Promise.all([
        runCli(["template", "rollback", "lobby", "--hash", "aaaaaaaa1111"], { home }),
        runCli(["template", "rollback", "lobby"], { home }),
        runCli(["template", "rollback", "lobby", "--json"], { home }),
        runCli(["template", "rollback", "fresh"], { home }),
      ]);
      assert.equal(withHash.code, 0, withHash.stderr);
      assert.match(withHash.stdout, /restored aaaaaaaa1111/);
      assert.equal(previous.code, 0, previous.stderr);
      assert.match(previous.stdout, /restored bbbbbbbb2222/);
      assert.equal(json.stdout, '{"status":"restored","hash":"bbbbbbbb2222"}\n');
      assert.equal(none.code, 1);
      assert.match(none.stderr, /no previous version/);
      const sent = bodies("POST", "/api/v1/templates/lobby/rollback")
        .map((b) => b.hash)
        .sort();
      assert.deepEqual(sent, ["aaaaaaaa1111", "bbbbbbbb2222", "bbbbbbbb2222"]);
      assert.equal(server.requests.filter((r) => r.path === "/api/v1/templates/fresh/rollback").length, 0);
    } finally {
      dispose();
    }
  });

  test("tables: template sizes and hash prefixes, group status, filter and sort; crash --since is sent as from", async () => {
    const { home, dispose } = homeWithContext(server.url);
    try {
      const [templates, sorted, filtered, crashes, recover, survivor] = await Promise.all([
        runCli(["template", "list"], { home }),
        runCli(["group", "list", "--sort", "players"], { home }),
        runCli(["group", "list", "--filter", "LOB"], { home }),
        runCli(["crash", "list", "--group", "lobby", "--since", "2026-11-20T00:00:00Z"], { home }),
        runCli(["cluster", "recover", "--eject", "c2, c3", "--yes"], { home }),
        runCli(["cluster", "recover", "--eject", "c2", "--i-have-only-survivor"], { home }),
      ]);
      assert.match(templates.stdout, /NAME\s+HASH\s+SIZE\s+DESCRIPTION/);
      assert.match(templates.stdout, /lobby\s+01234567\s+1\.5 KB\s+Lobby world/);
      assert.match(templates.stdout, /tiny\s+fedcba98\s+999 B/);
      assert.match(templates.stdout, /big\s+ffffffff\s+5\.5 MB\s+maps/);
      const rows = sorted.stdout
        .trim()
        .split("\n")
        .slice(1)
        .map((line) => line.split(/\s+/).slice(0, 2));
      assert.deepEqual(rows, [
        ["bedwars", "DRAIN"],
        ["Lobby", "UP"],
        ["skywars", "DOWN"],
      ]);
      const names = filtered.stdout
        .trim()
        .split("\n")
        .slice(1)
        .map((line) => line.split(/\s+/)[0]);
      assert.deepEqual(names, ["Lobby"]);
      assert.equal(crashes.code, 0, crashes.stderr);
      const crashQuery = server.requests.find((r) => r.path === "/api/v1/crashes")?.query;
      assert.deepEqual(crashQuery, { group: "lobby", from: "2026-11-20T00:00:00.000Z" });
      assert.equal(recover.code, 0, recover.stderr);
      assert.deepEqual(bodies("POST", "/api/v1/cluster/recover"), [{ eject: ["c2", "c3"] }], "only the confirmed recover was sent");
      assert.equal(survivor.code, 0);
      assert.match(survivor.stdout, /changed nothing/);
    } finally {
      dispose();
    }
  });
});

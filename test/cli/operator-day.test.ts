// An operator's day with cloudctl from the source tree (its bin, src/cli/launch.mjs) against a real
// controller and a real `cloud-daemon` running simulated servers (and Java, for a group whose jar
// is missing): a misspelled platform is refused; why a start failed reaches the crash record, the
// crash list, `group info` and the instance's log; `logs <instance>` (short id, --tail, --follow to
// the end), `exec` showing the output, ambiguous prefixes; users and roles as ADMIN and as a role
// without users.manage; templates made, filled and read from the CLI, their {{placeholders}}
// substituted in a real instance; confirmations answered on a terminal and refused on a pipe;
// setup from a pipe; deploy --watch on a pipe and deploy show of an older revision.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
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
import { TEST_ADMIN_PASSWORD } from "../support/controller.js";
import { eventually } from "../support/wait.js";
import { homeWithContext, runCli, runOnTerminal, spawnCli, tempHome, waitForExit, type CliResult } from "./harness.js";

/** Bound on waiting for the scheduler, the daemon or output (a loaded 2-core machine). */
const waitMs = 90_000;
/** Ports of this file's groups: 24200-24299. */
const ports = (start: number, end: number) => ["--port-start", String(start), "--port-end", String(end)];

interface Instance {
  id: string;
  group: string;
  state: string;
  port: number;
}

function ok(result: CliResult, what = ""): CliResult {
  assert.equal(result.code, 0, `${what} exit ${result.code}\nstdout: ${result.stdout}\nstderr: ${result.stderr}`);
  return result;
}

describe("an operator's day with cloudctl", { timeout: 900_000 }, () => {
  let c: GatewayController;
  let daemon: DaemonProcess;
  let home: string;
  let disposeHome = () => {};
  const work = mkdtempSync(join(tmpdir(), "cloud-operator-day-"));

  const cli = (args: string[], stdin?: string) => runCli(args, { home, stdin });
  const instances = async (group: string): Promise<Instance[]> =>
    ((await api(c, "GET", `/api/v1/services?group=${group}`)).json as Instance[]).filter((i) => i.group === group);
  const runningOf = (group: string, count: number) => {
    let seen: Instance[] = [];
    return eventually(
      async () => {
        seen = await instances(group);
        const up = seen.filter((i) => i.state === "RUNNING");
        return up.length >= count ? up : null;
      },
      () => `${count} RUNNING in ${group}: ${JSON.stringify(seen)}\n${daemon.output().slice(-2_000)}`,
      waitMs,
    );
  };
  const createGroup = (name: string, platform: string, extra: string[]) =>
    cli(["group", "create", "--name", name, "--platform", platform, "--memory", "128", ...extra]);

  before(async () => {
    c = await startGatewayController({ scheduler: { evaluationIntervalMs: 1_000 } });
    ({ home, dispose: disposeHome } = homeWithContext(c.url, c.adminToken));
    const { token } = await createToken(c);
    daemon = spawnDaemon([c.grpcAddress], token, { maxMemoryMb: 2048 });
    await eventually(() => eventsOf(c, "NODE_CONNECTED").length >= 1, "the daemon connected", waitMs);
  });

  after(async () => {
    await daemon?.stop();
    await c?.stop();
    cleanupDirs();
    disposeHome();
    rmSync(work, { recursive: true, force: true });
  });

  test("a misspelled platform is refused (422 naming the platforms the cluster runs) and nothing is created", async () => {
    const typo = await createGroup("typo", "papr", ports(24200, 24201));
    assert.equal(typo.code, 1, typo.stderr);
    assert.match(typo.stderr, /unknown platform "papr" \(did you mean paper\?\); the cluster runs simulated, .*paper.*\(VALIDATION_ERROR, HTTP 422\)/);
    assert.equal((await api(c, "GET", "/api/v1/groups/typo")).status, 404);
  });

  test("why a start failed reaches the crash record, crash list, group info and the instance's log", async () => {
    // Java is there but the group's jar is not; a simulated server whose port is taken cannot bind.
    const taken: Server = createServer();
    await new Promise<void>((resolve) => taken.listen(24210, "0.0.0.0", resolve));
    try {
      ok(await createGroup("nojar", "paper", ["--scaling-mode", "MANUAL", "--min", "1", "--max", "1", ...ports(24202, 24203)]));
      ok(await createGroup("bound", "simulated", ["--scaling-mode", "MANUAL", "--min", "1", "--max", "1", ...ports(24210, 24210)]));
      ok(await cli(["group", "start", "nojar"]));
      ok(await cli(["group", "start", "bound"]));
      const crashOf = (group: string) =>
        eventually(
          async () => ((await api(c, "GET", `/api/v1/crashes?group=${group}`)).json as { id: string; instanceId: string; reason: string }[])[0] ?? null,
          `a crash of ${group}\n${daemon.output().slice(-2_000)}`,
          waitMs,
        );
      const [nojar, bound] = await Promise.all([crashOf("nojar"), crashOf("bound")]);
      assert.match(nojar.reason, /jarfile|java/i, "the JVM's own last line");
      assert.match(bound.reason, /^exit 2: .*Failed to bind to 0\.0\.0\.0:24210.*EADDRINUSE/);

      const [list, info, shown, log] = await Promise.all([
        cli(["crash", "list", "--group", "bound"]),
        cli(["group", "info", "bound"]),
        cli(["crash", "info", bound.id.slice(0, 8)]),
        cli(["logs", bound.instanceId.slice(0, bound.instanceId.length - 3)]),
      ]);
      assert.match(ok(list).stdout, /REASON[\s\S]*exit 2: .*Failed to bind/);
      assert.match(ok(info).stdout, /Last crash\s+\S+ bound-\w+: exit 2: .*Failed to bind/);
      assert.match(ok(shown, "crash info by prefix").stdout, /Reason\s+exit 2: .*EADDRINUSE/);
      assert.match(ok(log, "logs by prefix").stdout, /\[cloud\] PREPARING[\s\S]*Failed to bind[\s\S]*\[cloud\] crashed: .*exit code 2/);
    } finally {
      await new Promise<void>((resolve) => taken.close(() => resolve()));
    }
  });

  test("logs, inst logs --tail and --follow to the end, exec with the output, and ambiguous prefixes", async () => {
    // A MANUAL group starts one instance per start.
    ok(await createGroup("arena", "simulated", ["--scaling-mode", "MANUAL", "--min", "1", "--max", "2", ...ports(24220, 24229)]));
    ok(await cli(["group", "start", "arena"]));
    ok(await cli(["group", "start", "arena"]));
    const [first, second] = await runningOf("arena", 2);
    const prefixOf = (id: string, other: string) => {
      let n = "arena-".length + 1;
      while (other.startsWith(id.slice(0, n))) n++;
      return id.slice(0, n);
    };
    const short = prefixOf(first.id, second.id);

    const [log, tail, exec, ambiguous, unknown] = await Promise.all([
      cli(["logs", short]),
      cli(["inst", "logs", first.id, "--tail", "2", "--json"]),
      cli(["inst", "exec", short, "say", "hello", "from", "exec"]),
      cli(["inst", "info", "arena-"]),
      cli(["inst", "info", "arena-zz"]),
    ]);
    assert.match(ok(log).stdout, /\[cloud\] STARTING[\s\S]*Done \([\s\S]*\[cloud\] RUNNING/);
    const answer = JSON.parse(ok(tail).stdout);
    assert.equal(answer.source, "daemon");
    assert.equal(answer.lines.length, 2);
    assert.match(ok(exec).stdout, /\[Server\] hello from exec/, "exec shows what the server printed");
    assert.equal(ambiguous.code, 1);
    assert.match(ambiguous.stderr, new RegExp(`prefix "arena-" is ambiguous: it begins 2 ids \\((${first.id}|${second.id}), (${first.id}|${second.id})\\)`));
    assert.equal(unknown.code, 4, unknown.stderr);

    const follow = spawnCli(["inst", "logs", second.id, "--follow", "--tail", "1"], { home });
    const ended = waitForExit(follow);
    let stdout = "";
    follow.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    await eventually(
      () => stdout.split("\n").length >= 2,
      () => `the tail: ${stdout}`,
      waitMs,
    );
    ok(await cli(["inst", "exec", second.id, "say", "while", "following", "--wait", "0"]));
    await eventually(
      () => stdout.includes("[Server] while following"),
      () => `followed: ${stdout}`,
      waitMs,
    );
    ok(await cli(["inst", "stop", second.id]));
    const result = await ended;
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, /ended/);
    assert.match(stdout, /while following[\s\S]*\[cloud\] STOPPED/, "the daemon's last lines follow before the stream ends");
  });

  test("users and roles from the CLI, following the REST API's permissions", async () => {
    const created = ok(await cli(["user", "create", "ops", "--role", "OPERATOR"], "ops-password-1\n"));
    assert.match(created.stdout, /created user ops with OPERATOR/);
    assert.match(ok(await cli(["user", "list"])).stdout, /admin\s+ADMIN[\s\S]*ops\s+OPERATOR/);

    const opsHome = tempHome();
    try {
      ok(await runCli(["setup", "-c", c.url, "-u", "ops"], { home: opsHome.home, stdin: "ops-password-1\n" }), "setup from a pipe");
      const [denied, ownPasswd, roles] = await Promise.all([
        runCli(["user", "list"], { home: opsHome.home }),
        runCli(["user", "passwd", "--generate"], { home: opsHome.home }),
        runCli(["role", "list"], { home: opsHome.home }),
      ]);
      for (const r of [denied, ownPasswd, roles]) assert.equal(r.code, 3, `users.manage and roles.manage are ADMIN's: ${r.stderr}`);

      const reset = ok(await cli(["user", "passwd", "ops", "--generate"]));
      const password = /password: (\S+)/.exec(reset.stdout)?.[1];
      assert.ok(password, reset.stdout);
      const stale = await runCli(["status"], { home: opsHome.home });
      assert.equal(stale.code, 2, "a password change revokes the user's tokens");
      ok(await runCli(["login", "-u", "ops"], { home: opsHome.home, stdin: `${password}\n` }), "the new password signs in");
    } finally {
      opsHome.dispose();
    }

    assert.equal(ok(await cli(["user", "roles", "ops", "--add", "VIEWER"])).stdout.trim(), "✔ ops: OPERATOR, VIEWER");
    ok(await cli(["role", "create", "auditor", "--permission", "audit.view", "--description", "reads the audit log"]));
    ok(await cli(["role", "update", "auditor", "--add", "system.view,groups.view"]));
    const permissions = /Permissions\s+(.+)/.exec(ok(await cli(["role", "show", "auditor"])).stdout)?.[1].split(", ");
    assert.deepEqual(permissions?.sort(), ["audit.view", "groups.view", "system.view"]);
    const badPermission = await cli(["role", "update", "auditor", "--add", "no.such.permission"]);
    assert.equal(badPermission.code, 1, badPermission.stderr);
    ok(await cli(["user", "roles", "ops", "--set", "auditor"]));
    const held = await cli(["role", "delete", "auditor", "--yes"]);
    assert.equal(held.code, 1, `a role someone holds is not deleted: ${held.stderr}`);
    ok(await cli(["user", "delete", "ops", "--yes"]));
    ok(await cli(["role", "delete", "auditor", "--yes"]));
    assert.match(ok(await cli(["role", "permissions"])).stdout, /users\.manage/);

    // The signed-in user's own password (another ADMIN here: the test's own token must keep working):
    // cloudctl signs in again with it and keeps the new token in the context.
    ok(await cli(["user", "create", "boss", "--role", "ADMIN", "-p", TEST_ADMIN_PASSWORD]));
    const bossHome = tempHome();
    try {
      ok(await runCli(["setup", "-c", c.url, "-u", "boss"], { home: bossHome.home, stdin: `${TEST_ADMIN_PASSWORD}\n` }));
      const changed = ok(await runCli(["user", "passwd"], { home: bossHome.home, stdin: "a-new-boss-password\n" }));
      assert.match(changed.stdout, /password of boss changed; signed in again with it/);
      ok(await runCli(["user", "list"], { home: bossHome.home }), "the context's new token works");
    } finally {
      bossHome.dispose();
    }
    ok(await cli(["user", "delete", "boss", "--yes"]));
  });

  test("templates from the CLI, and the placeholders a real instance gets", async () => {
    const src = join(work, "site");
    mkdirSync(join(src, "plugins"), { recursive: true });
    writeFileSync(join(src, "server.properties"), "motd={{group}} on {{port}} ({{instanceId}})\ngreeting={{greeting}}\nleft={{unknown}}\n");
    writeFileSync(join(src, "plugins", "a.txt"), "plugin a\n");
    ok(await cli(["template", "create", "site", "--description", "a test site"]));
    assert.match(ok(await cli(["template", "upload", "site", src])).stdout, /uploaded 2 file\(s\)/);
    ok(await cli(["template", "edit", "site", "notes.txt", "--from", "-"], "old words\n"));
    const editor = join(work, "editor.sh");
    writeFileSync(editor, '#!/bin/sh\nsed -i "s/old/new/" "$1"\n', { mode: 0o755 });
    ok(await runCli(["template", "edit", "site", "notes.txt"], { home, env: { EDITOR: editor } }), "edit in $EDITOR");
    assert.equal(ok(await cli(["template", "cat", "site", "notes.txt"])).stdout, "new words\n");
    const files = ok(await cli(["template", "files", "site", "-R"])).stdout;
    for (const path of ["plugins/", "plugins/a.txt", "server.properties", "notes.txt"]) assert.match(files, new RegExp(path.replace(".", "\\.")));
    const downloaded = join(work, "a.txt");
    ok(await cli(["template", "download", "site", "plugins/a.txt", "-o", downloaded]));
    assert.equal(readFileSync(downloaded, "utf8"), "plugin a\n");
    assert.equal((await cli(["template", "download", "site", "plugins/a.txt", "-o", downloaded])).code, 1, "no overwrite without --force");

    ok(await cli(["template", "vars", "site", "--set", "greeting=hello", "--set", "group=not-this"]));
    const vars = ok(await cli(["template", "vars", "site"])).stdout;
    assert.match(vars, /group\s+not-this\s+the daemon \(every instance\)/);
    assert.match(vars, /greeting\s+hello\s+this template/);
    assert.match(vars, /unknown\s+nobody: stays as written/);

    const archive = join(work, "site.tar.gz");
    ok(await cli(["template", "export", "site", "-o", archive]));
    ok(await cli(["template", "import", archive, "--name", "site-copy"]));
    assert.match(ok(await cli(["template", "files", "site-copy"])).stdout, /server\.properties/);
    ok(await cli(["template", "delete", "site-copy", "--yes"]));

    ok(await createGroup("placed", "simulated", ["--template", "site", "--scaling-mode", "MANUAL", "--min", "1", "--max", "1", ...ports(24230, 24231)]));
    ok(await cli(["group", "start", "placed"]));
    const [instance] = await runningOf("placed", 1);
    const properties = readFileSync(join(daemon.dir, "work", "dynamic", instance.id, "server.properties"), "utf8");
    assert.equal(properties, `motd=placed on ${instance.port} (${instance.id})\ngreeting=hello\nleft={{unknown}}\n`);
  });

  test("confirmations: answered on a terminal, refused on a pipe, exit 6 when nothing was done", async () => {
    ok(await createGroup("doomed", "simulated", ["--scaling-mode", "MANUAL", "--min", "0", "--max", "1", ...ports(24240, 24241)]));
    const piped = await cli(["group", "delete", "doomed"], "y\n");
    assert.equal(piped.code, 6, piped.stderr);
    assert.match(piped.stderr, /stdin is not a terminal.*--yes/);
    const declined = await runOnTerminal(["group", "delete", "doomed"], { home, stdin: "n\n" });
    assert.equal(declined.code, 6, declined.stdout);
    assert.match(declined.stdout, /Delete group "doomed"[\s\S]*cancelled: nothing was changed/);
    const cancelledDeploy = await runOnTerminal(["deploy", "doomed"], { home, stdin: "\n" });
    assert.equal(cancelledDeploy.code, 6, cancelledDeploy.stdout);
    assert.equal((await api(c, "GET", "/api/v1/groups/doomed/deployments")).json.length, 0, "no deployment was made");
    assert.equal((await api(c, "GET", "/api/v1/groups/doomed")).status, 200, "still there");
    const confirmed = await runOnTerminal(["group", "delete", "doomed"], { home, stdin: "y\n" });
    assert.equal(confirmed.code, 0, confirmed.stdout);
    assert.equal((await api(c, "GET", "/api/v1/groups/doomed")).status, 404);
  });

  test("deploy --watch on a pipe prints each change once; deploy show reads an older revision's own history", async () => {
    ok(await createGroup("web", "simulated", ["--scaling-mode", "MANUAL", "--min", "1", "--max", "2", ...ports(24250, 24259)]));
    ok(await cli(["group", "start", "web"]));
    const [initial] = await runningOf("web", 1);
    const watched = await cli(["deploy", "web", "--yes", "--min-healthy", "5", "--watch"]);
    ok(watched, "deploy --watch");
    const lines = watched.stdout.trim().split("\n").slice(1);
    assert.match(lines[0], /^\d\d:\d\d:\d\d deployment 2 of web: IN_PROGRESS/, "the first frame is a full line, not blank fields");
    assert.equal(new Set(lines.map((l) => l.slice(9))).size, lines.length, `no line twice:\n${watched.stdout}`);
    assert.ok(
      lines.some((l) => /NEW RUNNING .*healthy at/.test(l)),
      watched.stdout,
    );
    assert.ok(
      lines.some((l) => new RegExp(`${initial.id} OLD \\S+.*retired`).test(l)),
      watched.stdout,
    );
    assert.ok(
      lines.some((l) => /deployment 2 of web: COMPLETED DONE/.test(l)),
      watched.stdout,
    );

    ok(await cli(["deploy", "web", "--yes", "--min-healthy", "1", "--watch"]), "a second rollout");
    const older = JSON.parse(ok(await cli(["deploy", "show", "web", "2", "--json"])).stdout);
    assert.ok(older.instances.length >= 2, JSON.stringify(older.instances));
    for (const i of older.instances) {
      if (i.role === "NEW") assert.equal(i.deploymentRevision, 2, `revision 2 shows its own instances: ${JSON.stringify(i)}`);
      else assert.equal(i.id, initial.id, "the old instance it retired");
    }
    assert.ok(
      older.instances.some((i: { id: string; retired: boolean }) => i.id === initial.id && i.retired),
      "RETIRED filled",
    );
    const human = ok(await cli(["deploy", "show", "web", "2"])).stdout;
    assert.match(human, /Batch\s+1 batch\(es\) of 1, done/);
    assert.match(human, new RegExp(`${initial.id}.*OLD.*yes`));
  });
});

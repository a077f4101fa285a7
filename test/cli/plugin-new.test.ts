// `cloudctl plugin new`: flag checks of spec document 3, the refusal for Java platforms, --dry and
// --force, and the emitted TypeScript project: compiled against the SDK as the package exposes it
// (the `./sdk` export of package.json), then run against a server speaking the plugin routes.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { startSpecServer } from "../sdk/spec-server.js";
import { eventually } from "../support/wait.js";
import { runCli, tempHome } from "./harness.js";

const ROOT = join(import.meta.dirname, "..", "..");
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
const compileTimeoutMs = 120_000;

describe("cloudctl plugin new", { timeout: 300_000 }, () => {
  let home: { home: string; dispose: () => void };
  let work: string;

  before(() => {
    home = tempHome();
    work = mkdtempSync(join(tmpdir(), "plugin-new-"));
  });
  after(() => {
    home?.dispose();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it("checks the flags: platform required and known (any case), --mc-version 1.20/1.21 for paper only, names; Java platforms are refused with the reason", async () => {
    const cases: [string[], RegExp][] = [
      [["plugin", "new", "hub"], /--platform is required/],
      [["plugin", "new", "hub", "--platform", "forge"], /unknown platform "forge"/],
      [["plugin", "new", "hub", "--platform", "velocity", "--mc-version", "1.21"], /--mc-version applies to --platform paper only/],
      [["plugin", "new", "hub", "--platform", "paper", "--mc-version", "1.19"], /--mc-version must be 1\.20 or 1\.21/],
      [["plugin", "new", "9hub", "--platform", "simulated"], /invalid plugin name/],
      [["plugin", "new", "hub", "--platform", "simulated", "--package", "Bad Name"], /invalid --package/],
      [["plugin", "new", "hub", "--platform", "PAPER", "--mc-version", "1.21"], /paper plugins are Java \(Gradle\) projects.*\/api\/plugin/],
      [["plugin", "new", "hub", "--platform", "BungeeCord"], /bungeecord plugins are Java/],
    ];
    for (const [args, message] of cases) {
      const result = await runCli([...args, "--repo-root", work], { home: home.home });
      assert.equal(result.code, 1, `${args.join(" ")}: ${result.stderr}`);
      assert.match(result.stderr, message, args.join(" "));
    }
    assert.ok(!existsSync(join(work, "hub")), "a refused command wrote nothing");
  });

  it("--dry lists the files and writes nothing; an existing non-empty directory needs --force", async () => {
    const dry = await runCli(["plugin", "new", "lobby-tools", "--platform", "simulated", "--repo-root", work, "--dry"], { home: home.home });
    assert.equal(dry.code, 0, dry.stderr);
    assert.match(dry.stdout, /would write .*lobby-tools\/src\/index\.ts/);
    assert.ok(!existsSync(join(work, "lobby-tools")));
    mkdirSync(join(work, "taken"));
    writeFileSync(join(work, "taken", "keep.txt"), "mine");
    const refused = await runCli(["plugin", "new", "taken", "--platform", "simulated", "--repo-root", work], { home: home.home });
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /exists and is not empty \(use --force/);
    const forced = await runCli(["plugin", "new", "taken", "--platform", "simulated", "--repo-root", work, "--force", "--json"], { home: home.home });
    assert.equal(forced.code, 0, forced.stderr);
    assert.deepEqual(JSON.parse(forced.stdout).files, ["package.json", "tsconfig.json", ".gitignore", "src/index.ts", "README.md"]);
    assert.equal(readFileSync(join(work, "taken", "keep.txt"), "utf8"), "mine");
  });

  it("emits a TypeScript project that compiles against cloud-control-plane/sdk and runs: ready, a command from stdin", async () => {
    const result = await runCli(
      ["plugin", "new", "Hub_Tools", "--platform", "Simulated", "--repo-root", work, "--description", "Moves players", "--author", "Ops"],
      { home: home.home },
    );
    assert.equal(result.code, 0, result.stderr);
    const project = join(work, "Hub_Tools");
    const manifest = JSON.parse(readFileSync(join(project, "package.json"), "utf8"));
    assert.equal(manifest.name, "hub-tools");
    assert.equal(manifest.description, "Moves players");
    assert.equal(manifest.author, "Ops");
    assert.equal(manifest.dependencies["cloud-control-plane"], "^0.1.0");

    // The package as installed: the SDK compiled (with declarations) under dist/, package.json with the real exports map.
    const installed = join(project, "node_modules", "cloud-control-plane");
    mkdirSync(installed, { recursive: true });
    const ours = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
    writeFileSync(join(installed, "package.json"), JSON.stringify({ name: ours.name, version: ours.version, type: "module", exports: ours.exports }));
    const sdk = spawnSync(
      process.execPath,
      [
        tsc,
        "--ignoreConfig",
        join(ROOT, "src", "sdk", "index.ts"),
        ...["--declaration", "--outDir", join(installed, "dist"), "--rootDir", ROOT, "--module", "NodeNext", "--moduleResolution", "NodeNext"],
        ...["--target", "ES2023", "--lib", "ES2023", "--strict", "--skipLibCheck", "--types", "node", "--verbatimModuleSyntax"],
      ],
      { encoding: "utf8", timeout: compileTimeoutMs },
    );
    assert.equal(sdk.status, 0, sdk.stdout + sdk.stderr);
    mkdirSync(join(project, "node_modules", "@types"), { recursive: true });
    symlinkSync(join(ROOT, "node_modules", "@types", "node"), join(project, "node_modules", "@types", "node"));

    const build = spawnSync(process.execPath, [tsc, "-p", join(project, "tsconfig.json")], { encoding: "utf8", timeout: compileTimeoutMs });
    assert.equal(build.status, 0, build.stdout + build.stderr);
    assert.ok(existsSync(join(project, "dist", "index.js")));

    const server = await startSpecServer({ token: "wl-plugin" });
    const child = spawn(process.execPath, [join(project, "dist", "index.js")], {
      cwd: project,
      env: {
        PATH: process.env.PATH ?? "",
        CLOUD_CONTROLLER_URL: server.url,
        CLOUD_WORKLOAD_TOKEN: "wl-plugin",
        CLOUD_INSTANCE_ID: "lobby-1",
        CLOUD_GROUP: "lobby",
      },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    try {
      await eventually(
        () => output.includes("Hub_Tools ready on lobby-1"),
        () => `the plugin to report ready (output: ${output})`,
        20_000,
      );
      assert.ok(server.requests.some((r) => r.path === "/api/plugin/ready" && r.headers.authorization === "Bearer wl-plugin"));
      await eventually(() => server.openStreams() === 1, "the plugin's event stream", 20_000);
      child.stdin.write("hello Alex\n");
      await eventually(
        () => output.includes("Hello, Alex!"),
        () => `the command's answer (output: ${output})`,
        20_000,
      );
      child.stdin.end();
      assert.equal(await exited, 0);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
      await server.close();
    }
  });
});

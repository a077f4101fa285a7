// Helpers for the daemon tests: temporary work directories, free ports, a runner whose events are
// recorded, bounded waits, and the check that every process a test started is gone.
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InstanceRunner, type InstanceRunnerOptions, type InstanceSpec, type RunnerEvent } from "../../src/daemon/instance-runner.js";
import { builtInPlatforms, simulatedPlatform, type PlatformDefinition } from "../../src/daemon/platforms.js";
import { SpawnerLauncher, type ProcessLauncher } from "../../src/daemon/process-launcher.js";
import { eventually } from "../support/wait.js";

/** Environment that keeps the simulated server on loopback and makes it chatty. */
export const SIM_TEST_ENV = { CLOUD_SIM_BIND_HOST: "127.0.0.1", CLOUD_SIM_TICK_INTERVAL_MS: "200", CLOUD_SIM_STOP_DELAY_MS: "50" };

export async function freePort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export async function tempDir(prefix: string): Promise<string> {
  return await mkdtemp(join(tmpdir(), prefix));
}

/** True while a process with this pid exists. */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** A runner over a temporary directory with every event recorded and every pid remembered. */
export class RunnerHarness {
  readonly events: RunnerEvent[] = [];
  readonly pids = new Set<number>();
  constructor(
    readonly runner: InstanceRunner,
    readonly workDir: string,
    private readonly launcher: ProcessLauncher,
  ) {
    runner.subscribe((event) => {
      this.events.push(event);
      if (event.type === "state" && event.pid !== undefined) this.pids.add(event.pid);
    });
  }

  static async create(options: Partial<InstanceRunnerOptions> & { extraPlatforms?: PlatformDefinition[] } = {}): Promise<RunnerHarness> {
    const workDir = await tempDir("daemon-runner-");
    const platforms = builtInPlatforms();
    platforms.set(
      "sim-fast-stop",
      simulatedPlatform({ id: "sim-fast-stop", readiness: { kind: "log-line", pattern: "Done (" }, stopTimeoutMs: 300, termTimeoutMs: 300 }),
    );
    for (const platform of options.extraPlatforms ?? []) platforms.set(platform.id, platform);
    // The daemon's own way of starting processes: through the spawner helper.
    const launcher = new SpawnerLauncher();
    const runner = new InstanceRunner({ workDir, platforms, launcher, ...options });
    return new RunnerHarness(runner, workDir, launcher);
  }

  states(instanceId: string): string[] {
    return this.events.flatMap((event) => (event.type === "state" && event.instanceId === instanceId ? [event.state] : []));
  }

  consoleLines(instanceId: string): string[] {
    return this.events.flatMap((event) => (event.type === "console" && event.instanceId === instanceId ? [event.line] : []));
  }

  async waitForState(instanceId: string, state: string, timeoutMs = 15_000): Promise<void> {
    await eventually(() => this.states(instanceId).includes(state), `${instanceId} ${state} (saw ${this.states(instanceId).join(",")})`, timeoutMs);
  }

  async waitForLine(instanceId: string, text: string, timeoutMs = 10_000): Promise<void> {
    await eventually(() => this.consoleLines(instanceId).some((line) => line.includes(text)), `${instanceId} console "${text}"`, timeoutMs);
  }

  /** Kills whatever is left, then checks no process the runner started is alive and removes the directory. */
  async close(): Promise<void> {
    this.runner.killAllNow();
    await Promise.race([this.runner.shutdown("force"), new Promise((resolve) => setTimeout(resolve, 5_000))]);
    await eventually(() => [...this.pids].every((pid) => !isAlive(pid)), "every started process to be gone", 5_000);
    await this.launcher.close();
    await rm(this.workDir, { recursive: true, force: true });
  }
}

/** A simulated instance spec on a free port. */
export async function simSpec(instanceId: string, overrides: Partial<InstanceSpec> = {}): Promise<InstanceSpec> {
  return {
    instanceId,
    group: "lobby",
    platform: "simulated-standalone",
    port: await freePort(),
    memoryMb: 256,
    static: false,
    templates: [],
    env: SIM_TEST_ENV,
    ...overrides,
  };
}

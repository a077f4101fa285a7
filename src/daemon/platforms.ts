/**
 * Platforms are data: a {@link PlatformDefinition} says how to start one kind of game server (the
 * command line with placeholders), how it learns its port, how the daemon knows it is ready and how
 * it is stopped. The instance runner interprets these; adding a platform means adding a value.
 * Decisions: docs/decisions/daemon-runner.md.
 */
import { SIMULATED_SERVER_ENV, simulatedServerScriptPath } from "./simulated-server/contract.js";
import { RunnerError } from "./runner-errors.js";

/** How the instance's port reaches the process. */
export type PortPassing =
  /** The command line carries a `{port}` placeholder. */
  | "arg"
  /** Only the `CLOUD_PORT` environment variable (always set). */
  | "env"
  /** A `key=value` properties file in the working directory is written or patched before start. */
  | "file";

/** When the daemon reports an instance RUNNING. */
export type ReadinessRule =
  /** The in-server plugin calls `/api/plugin/ready`; the controller relays it as `markReady`. */
  | { kind: "plugin" }
  /** A console line (stdout or stderr) contains `pattern` (a plain substring, not a regex). */
  | { kind: "log-line"; pattern: string }
  /** A TCP connect to 127.0.0.1:<port> succeeds. */
  | { kind: "port-open" };

/** Where a `file`-passed port is written: `key=<port>` in the properties file `path`. */
export interface PortFile {
  /** Relative to the instance working directory. */
  path: string;
  key: string;
}

/** One kind of game server, as data. */
export interface PlatformDefinition {
  id: string;
  /**
   * argv; each element may hold placeholders {memoryMb}, {jarFile}, {port}, {instanceId}, {group},
   * {workDir}. An unknown placeholder is an INVALID_PLATFORM error.
   */
  command: readonly string[];
  portPassing: PortPassing;
  /** Required when portPassing is "file". */
  portFile?: PortFile;
  readiness: ReadinessRule;
  /** Written to stdin (with a newline) to stop gracefully; null: go straight to SIGTERM. */
  stopCommand: string | null;
  /** How long the stop command may take before SIGTERM. */
  stopTimeoutMs: number;
  /** How long SIGTERM may take before SIGKILL. */
  termTimeoutMs: number;
  /** Extra environment for every instance of the platform. */
  env?: Readonly<Record<string, string>>;
}

/** Placeholder values for one instance. */
export interface PlaceholderValues {
  memoryMb: number;
  jarFile: string;
  port: number;
  instanceId: string;
  group: string;
  workDir: string;
}

const PLACEHOLDER = /\{([A-Za-z]+)\}/g;
const PLACEHOLDER_NAMES: ReadonlySet<string> = new Set(["memoryMb", "jarFile", "port", "instanceId", "group", "workDir"]);
/** Platform timeouts above this are refused: a stop must end within minutes, not hang. */
export const PLATFORM_TIMEOUT_MAX_MS = 600_000;

/** Checks a definition; throws INVALID_PLATFORM naming the first problem. */
export function validatePlatform(platform: PlatformDefinition): void {
  const fail = (why: string): never => {
    throw new RunnerError("INVALID_PLATFORM", `Platform ${platform.id}: ${why}`);
  };
  if (!/^[a-z][a-z0-9-]*$/.test(platform.id)) fail("id must match ^[a-z][a-z0-9-]*$");
  if (platform.command.length === 0 || platform.command[0] === "") fail("command is empty");
  for (const part of platform.command) {
    for (const match of part.matchAll(PLACEHOLDER)) {
      if (!PLACEHOLDER_NAMES.has(match[1])) fail(`unknown placeholder {${match[1]}}`);
    }
  }
  if (platform.portPassing === "arg" && !platform.command.some((part) => part.includes("{port}"))) {
    fail('portPassing "arg" needs a {port} placeholder in the command');
  }
  if (platform.portPassing === "file" && (!platform.portFile || platform.portFile.path === "" || platform.portFile.key === "")) {
    fail('portPassing "file" needs portFile { path, key }');
  }
  if (platform.portFile && (platform.portFile.path.startsWith("/") || platform.portFile.path.split(/[\\/]/).includes(".."))) {
    fail("portFile.path must stay inside the working directory");
  }
  if (platform.readiness.kind === "log-line" && platform.readiness.pattern === "") fail("log-line readiness needs a pattern");
  for (const [name, value] of [
    ["stopTimeoutMs", platform.stopTimeoutMs],
    ["termTimeoutMs", platform.termTimeoutMs],
  ] as const) {
    if (!Number.isInteger(value) || value < 0 || value > PLATFORM_TIMEOUT_MAX_MS) fail(`${name} must be an integer in 0..${PLATFORM_TIMEOUT_MAX_MS}`);
  }
}

/** The command line with every placeholder replaced. */
export function renderCommand(platform: PlatformDefinition, values: PlaceholderValues): string[] {
  return platform.command.map((part) =>
    part.replace(PLACEHOLDER, (whole, name: string) => (PLACEHOLDER_NAMES.has(name) ? String(values[name as keyof PlaceholderValues]) : whole)),
  );
}

/**
 * Writes `key=<port>` into a properties file, replacing an existing `key=` line or appending one;
 * every other line is kept as it is (templates own the rest of the file).
 */
export function patchPropertiesPort(existing: string | null, key: string, port: number): string {
  const lines = existing === null || existing === "" ? [] : existing.replace(/\r?\n$/, "").split(/\r?\n/);
  const keyPattern = new RegExp(`^\\s*${key.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\\s*[=:]`);
  let replaced = false;
  const out = lines.map((line) => {
    if (!replaced && keyPattern.test(line)) {
      replaced = true;
      return `${key}=${port}`;
    }
    return line;
  });
  if (!replaced) out.push(`${key}=${port}`);
  return `${out.join("\n")}\n`;
}

/**
 * The simulated game server (src/daemon/simulated-server/server.cjs) run with the daemon's own Node
 * binary. Plugin readiness: it calls `/api/plugin/ready` when given a controller URL and token.
 */
export function simulatedPlatform(overrides: Partial<PlatformDefinition> = {}): PlatformDefinition {
  return {
    id: "simulated",
    command: [process.execPath, simulatedServerScriptPath()],
    portPassing: "env",
    readiness: { kind: "plugin" },
    stopCommand: "stop",
    stopTimeoutMs: 10_000,
    termTimeoutMs: 5_000,
    ...overrides,
  };
}

/**
 * The built-in platforms: `simulated` (plugin readiness), `simulated-proxy` (the same program as a
 * proxy: the controller counts instances of this platform as proxies), `simulated-standalone` (ready
 * on its `Done (` line: no controller needed), and Java servers as data (not exercised in tests):
 * `paper` (port through server.properties) and `velocity` (port on the command line).
 */
export function builtInPlatforms(): Map<string, PlatformDefinition> {
  const platforms: PlatformDefinition[] = [
    simulatedPlatform(),
    simulatedPlatform({ id: "simulated-proxy", env: { [SIMULATED_SERVER_ENV.mode]: "proxy" } }),
    simulatedPlatform({ id: "simulated-standalone", readiness: { kind: "log-line", pattern: "Done (" } }),
    {
      id: "paper",
      command: ["java", "-Xmx{memoryMb}M", "-jar", "{jarFile}", "nogui"],
      portPassing: "file",
      portFile: { path: "server.properties", key: "server-port" },
      readiness: { kind: "log-line", pattern: "Done (" },
      stopCommand: "stop",
      stopTimeoutMs: 60_000,
      termTimeoutMs: 15_000,
    },
    {
      id: "velocity",
      command: ["java", "-Xmx{memoryMb}M", "-jar", "{jarFile}", "--port", "{port}"],
      portPassing: "arg",
      readiness: { kind: "log-line", pattern: "Done (" },
      stopCommand: "end",
      stopTimeoutMs: 30_000,
      termTimeoutMs: 10_000,
    },
  ];
  for (const platform of platforms) validatePlatform(platform);
  return new Map(platforms.map((platform) => [platform.id, platform]));
}

/**
 * `cloudctl plugin new <name> --platform <p>`: scaffolds a plugin project locally (spec document 3,
 * "Client commands for modules and plugins"). Node-based platforms (`simulated`) get a TypeScript
 * project on the plugin SDK; the spec's Java platforms (paper, spigot, folia, velocity, bungeecord)
 * are validated and then refused with a clear message: no Java SDK ships with this package
 * (docs/decisions/plugin-sdk.md).
 */
import { mkdir, readdir, stat, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import type { Command } from "commander";
import { markLocalOnly } from "../auth-gate.js";
import { CliError } from "../exit-codes.js";
import type { RuntimeFactory } from "../runtime.js";
import { pluginProjectFiles } from "./plugin-template.js";

/** The spec's platforms (Java) and the Node-based ones this package scaffolds. */
export const JAVA_PLUGIN_PLATFORMS = ["paper", "spigot", "folia", "velocity", "bungeecord"] as const;
export const NODE_PLUGIN_PLATFORMS = ["simulated"] as const;
export const MC_VERSIONS = ["1.20", "1.21"] as const;
const PLUGIN_NAME = /^[A-Za-z][A-Za-z0-9_-]{0,63}$/;
const NPM_NAME = /^(@[a-z0-9-~][a-z0-9-._~]*\/)?[a-z0-9-~][a-z0-9-._~]{0,213}$/;
/** Versions the emitted project depends on: this package's own, and its TypeScript and Node typings. */
const SDK_RANGE = "^0.1.0";
const TYPESCRIPT_RANGE = "~6.0";
const TYPES_NODE_RANGE = "^20.19.0";

interface PluginNewOptions {
  platform?: string;
  mcVersion?: string;
  package?: string;
  repoRoot?: string;
  description?: string;
  author?: string;
  force?: boolean;
  dry?: boolean;
}

/** Registers `plugin new`. */
export function registerPluginCommands(program: Command, runtime: RuntimeFactory): void {
  const plugin = program.command("plugin").description("plugin projects (local only)");
  const create = plugin
    .command("new <name>")
    .description(`scaffold a plugin project: a TypeScript project on the plugin SDK for ${NODE_PLUGIN_PLATFORMS.join(", ")}`)
    .option("--platform <platform>", `required: ${[...JAVA_PLUGIN_PLATFORMS, ...NODE_PLUGIN_PLATFORMS].join(", ")} (case-insensitive)`)
    .option("--mc-version <version>", "1.20 (default) or 1.21; paper only")
    .option("--package <name>", "npm package name (default: the name, lower-cased)")
    .option("--repo-root <dir>", "directory the project is created in (default: the current directory)")
    .option("--description <text>", "project description")
    .option("--author <name>", "project author")
    .option("--force", "write into an existing, non-empty directory (files of the same name are replaced)")
    .option("--dry", "print what would be written; write nothing")
    .addHelpText(
      "after",
      `\nJava platforms (${JAVA_PLUGIN_PLATFORMS.join(", ")}) are accepted by the flags and refused: this package ships no Java SDK;\na Java plugin calls the plugin REST API (/api/plugin) directly.`,
    )
    .action(async (name: string, options: PluginNewOptions, cmd: Command) => {
      const rt = runtime(cmd);
      const spec = checkOptions(name, options);
      const directory = resolve(options.repoRoot ?? process.cwd(), name);
      const files = pluginProjectFiles({
        name,
        packageName: spec.packageName,
        description: options.description ?? `A ${spec.platform} plugin`,
        author: options.author ?? "",
        platform: spec.platform,
        sdkRange: SDK_RANGE,
        typescriptRange: TYPESCRIPT_RANGE,
        typesNodeRange: TYPES_NODE_RANGE,
      });
      if (!options.force && (await nonEmptyDirectory(directory))) throw new CliError(`${directory} exists and is not empty (use --force to write into it)`);
      if (!options.dry) {
        for (const file of files) {
          const target = join(directory, file.path);
          await mkdir(dirname(target), { recursive: true });
          await writeFile(target, file.content);
        }
      }
      if (rt.json) {
        rt.out.jsonValue({ directory, platform: spec.platform, dryRun: Boolean(options.dry), files: files.map((f) => f.path) });
        return;
      }
      for (const file of files)
        rt.out.line(`${options.dry ? "would write" : "wrote"} ${join(directory, file.path)} (${Buffer.byteLength(file.content)} bytes)`);
      if (!options.dry) rt.out.success(`created ${spec.platform} plugin ${name}: cd ${directory} && npm install && npm run build`);
    });
  markLocalOnly(create);
}

function checkOptions(name: string, options: PluginNewOptions): { platform: string; packageName: string } {
  if (!PLUGIN_NAME.test(name)) throw new CliError(`invalid plugin name "${name}": 1-64 of A-Z a-z 0-9 _ -, starting with a letter`);
  if (!options.platform) throw new CliError(`--platform is required: ${[...JAVA_PLUGIN_PLATFORMS, ...NODE_PLUGIN_PLATFORMS].join(", ")}`);
  const platform = options.platform.toLowerCase();
  const java = (JAVA_PLUGIN_PLATFORMS as readonly string[]).includes(platform);
  if (!java && !(NODE_PLUGIN_PLATFORMS as readonly string[]).includes(platform))
    throw new CliError(`unknown platform "${options.platform}": use one of ${[...JAVA_PLUGIN_PLATFORMS, ...NODE_PLUGIN_PLATFORMS].join(", ")}`);
  if (options.mcVersion !== undefined) {
    if (!(MC_VERSIONS as readonly string[]).includes(options.mcVersion))
      throw new CliError(`--mc-version must be ${MC_VERSIONS.join(" or ")}, not "${options.mcVersion}"`);
    if (platform !== "paper") throw new CliError(`--mc-version applies to --platform paper only, not ${platform}`);
  }
  const packageName = options.package ?? name.toLowerCase().replace(/_/g, "-");
  if (!NPM_NAME.test(packageName)) throw new CliError(`invalid --package "${packageName}": an npm package name (lower case, no spaces)`);
  if (java)
    throw new CliError(
      `${platform} plugins are Java (Gradle) projects, which this cloudctl does not generate: no Java SDK ships with it. ` +
        `A Java plugin calls the plugin REST API (/api/plugin, spec document 3) with its workload token; ` +
        `Node-based platforms (${NODE_PLUGIN_PLATFORMS.join(", ")}) get a TypeScript project on cloud-control-plane/sdk.`,
    );
  return { platform, packageName };
}

async function nonEmptyDirectory(directory: string): Promise<boolean> {
  try {
    if (!(await stat(directory)).isDirectory()) return true;
    return (await readdir(directory)).length > 0;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw error;
  }
}

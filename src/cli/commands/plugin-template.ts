/**
 * The files `cloudctl plugin new` writes for a Node-based platform: a TypeScript project built
 * against the plugin SDK (`cloud-control-plane/sdk`). Pure: names in, file contents out.
 */

export interface PluginProjectSpec {
  /** The plugin's name (the directory). */
  name: string;
  /** npm package name. */
  packageName: string;
  description: string;
  author: string;
  platform: string;
  /** Version range of cloud-control-plane the project depends on. */
  sdkRange: string;
  typescriptRange: string;
  typesNodeRange: string;
}

export interface ProjectFile {
  path: string;
  content: string;
}

const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;

export function pluginProjectFiles(spec: PluginProjectSpec): ProjectFile[] {
  const packageJson = {
    name: spec.packageName,
    version: "0.1.0",
    private: true,
    description: spec.description,
    ...(spec.author ? { author: spec.author } : {}),
    type: "module",
    main: "dist/index.js",
    engines: { node: ">=20.19" },
    scripts: { build: "tsc -p tsconfig.json", start: "node dist/index.js" },
    dependencies: { "cloud-control-plane": spec.sdkRange },
    devDependencies: { "@types/node": spec.typesNodeRange, typescript: spec.typescriptRange },
  };
  const tsconfig = {
    compilerOptions: {
      target: "ES2023",
      lib: ["ES2023"],
      module: "NodeNext",
      moduleResolution: "NodeNext",
      strict: true,
      verbatimModuleSyntax: true,
      skipLibCheck: true,
      outDir: "dist",
      rootDir: "src",
      types: ["node"],
    },
    include: ["src"],
  };
  return [
    { path: "package.json", content: json(packageJson) },
    { path: "tsconfig.json", content: json(tsconfig) },
    { path: ".gitignore", content: "node_modules/\ndist/\n" },
    { path: "src/index.ts", content: indexSource(spec) },
    { path: "README.md", content: readme(spec) },
  ];
}

function indexSource(spec: PluginProjectSpec): string {
  return `/**
 * ${spec.name}: ${spec.description}
 *
 * Runs inside a ${spec.platform} instance. The daemon gives every instance CLOUD_CONTROLLER_URL,
 * CLOUD_WORKLOAD_TOKEN, CLOUD_INSTANCE_ID and CLOUD_GROUP; connectToCloud() reads them.
 */
import { Arguments, CommandBuilder, connectToCloud, consoleSender, stripFormatting, type CloudPlayer } from "cloud-control-plane/sdk";

const cloud = connectToCloud({ logger: { info: (m) => console.log(m), warn: (m) => console.warn(m) } });

// Player events from the whole network (the event stream reconnects by itself).
cloud.events.subscribe("PLAYER_CONNECTED", (event) => console.log(\`\${String(event.data.name)} joined \${String(event.data.instanceId)}\`));
cloud.eventStream.start();

// Commands: a builder tree; a node without a handler gets a generated help page.
cloud.commands.register(
  CommandBuilder.literal("hello")
    .description("greets the sender")
    .argument(Arguments.string("name").optional())
    .handler((context) => context.reply(\`Hello, \${context.get<string | undefined>("name") ?? context.sender.name()}!\`))
    .build(),
);
cloud.commands.register(
  CommandBuilder.literal("send")
    .description("moves a player to a group")
    .argument(Arguments.player("player"))
    .argument(Arguments.group("group"))
    .handler(async (context) => {
      const player = context.get<CloudPlayer>("player");
      const result = await cloud.client.transferPlayer(player.uniqueId(), context.get("group"));
      context.failUnless(result.success, \`Transfer refused: \${result.failureReason}\`);
      context.reply(\`Queued for \${result.targetInstanceId ?? context.get<string>("group")}\`);
    })
    .build(),
);

// Console lines are commands.
const sender = consoleSender((text) => console.log(stripFormatting(text)));
let pending = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk: string) => {
  pending += chunk;
  for (let end = pending.indexOf("\\n"); end >= 0; end = pending.indexOf("\\n")) {
    const line = pending.slice(0, end).trim();
    pending = pending.slice(end + 1);
    if (line !== "") void cloud.commands.dispatch(sender, line).then((outcome) => outcome === "unknown" && console.log(\`Unknown command: \${line}\`));
  }
});
process.stdin.on("end", () => void cloud.close().then(() => process.exit(0)));

await cloud.client.markReady();
console.log(\`${spec.name} ready on \${cloud.client.instanceId()}\`);
`;
}

function readme(spec: PluginProjectSpec): string {
  return `# ${spec.name}

${spec.description}

A ${spec.platform} plugin built on the control plane's TypeScript plugin SDK
(\`cloud-control-plane/sdk\`).

\`\`\`sh
npm install
npm run build
npm start        # inside an instance: the daemon sets CLOUD_CONTROLLER_URL and CLOUD_WORKLOAD_TOKEN
\`\`\`

\`src/index.ts\` connects, reports ready, follows player events and registers two commands
(\`hello [name]\`, \`send <player> <group>\`) read from standard input.
`;
}

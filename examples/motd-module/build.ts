/**
 * Builds the example module: bundles src/index.ts with the module SDK into backend/index.js
 * (esbuild, one ES module), writes the manifest with the version asked for, adds the frontend,
 * packs the bundle (`motd-<version>.tgz`) and signs it with the development key
 * (`motd-<version>.tgz.sig`), which the development profile trusts.
 *
 *   npx tsx examples/motd-module/build.ts [--version 1.1.0] [--out examples/motd-module/dist] [--key key.pem]
 */
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseDocument } from "yaml";
import { digestFile } from "../../src/modules/bundle/bundle-reader.js";
import { packModuleDirectory } from "../../src/modules/bundle/pack.js";
import { signBundleDigest } from "../../src/modules/bundle/signature.js";

const here = import.meta.dirname;
export const DEVELOPMENT_KEY = join(here, "signing", "development-key.pem");

export interface BuiltModule {
  bundle: string;
  signature: string;
  version: string;
  sha256: string;
}

/** Builds version `version` of the example into `outDir`. */
export async function buildMotdModule(options: { version?: string; outDir: string; keyPath?: string }): Promise<BuiltModule> {
  const esbuild = createRequire(import.meta.url)("esbuild") as typeof import("esbuild");
  const staging = await mkdtemp(join(tmpdir(), "motd-build-"));
  try {
    await esbuild.build({
      entryPoints: [join(here, "src", "index.ts")],
      outfile: join(staging, "backend", "index.js"),
      bundle: true,
      platform: "node",
      format: "esm",
      target: "node20",
      legalComments: "none",
      logLevel: "silent",
    });
    const manifest = parseDocument(await readFile(join(here, "module.yaml"), "utf8"));
    const version = options.version ?? String(manifest.get("version"));
    manifest.set("version", version);
    await mkdir(join(staging, "META-INF", "cloud"), { recursive: true });
    await writeFile(join(staging, "META-INF", "cloud", "module.yaml"), manifest.toString());
    await cp(join(here, "frontend"), join(staging, "META-INF", "frontend"), { recursive: true });
    await mkdir(options.outDir, { recursive: true });
    const bundle = join(options.outDir, `motd-${version}.tgz`);
    await packModuleDirectory(staging, bundle);
    const { sha256 } = await digestFile(bundle);
    const signature = `${bundle}.sig`;
    await writeFile(signature, `${signBundleDigest(sha256, await readFile(options.keyPath ?? DEVELOPMENT_KEY, "utf8"))}\n`);
    return { bundle, signature, version, sha256 };
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.filename === process.argv[1]) {
  const arg = (name: string) => {
    const at = process.argv.indexOf(name);
    return at > 0 ? process.argv[at + 1] : undefined;
  };
  const built = await buildMotdModule({ version: arg("--version"), outDir: arg("--out") ?? join(here, "dist"), keyPath: arg("--key") });
  process.stdout.write(`${built.bundle}\n${built.signature}\nsha256 ${built.sha256}\n`);
}

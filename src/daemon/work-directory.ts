/**
 * An instance's working directory on disk: made ready before the spawn (emptied for a dynamic
 * instance, kept for a static one, templates unpacked, the port written into the platform's
 * properties file) and removed after a dynamic instance ends.
 */
import { access, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { patchPropertiesPort, type PlatformDefinition } from "./platforms.js";
import type { InstanceSpec, TemplateUnpacker } from "./runner-types.js";
import type { INSTANCE_PLACEHOLDERS } from "../wire/template-text.js";

/** What {@link prepareWorkDirectory} works on. */
export interface WorkDirectoryPlan {
  spec: InstanceSpec;
  platform: PlatformDefinition;
  workDir: string;
  /** Absent: nothing to unpack. */
  unpackTemplates: TemplateUnpacker | undefined;
  /** Read just before unpacking: false skips it (the instance is being stopped). */
  shouldUnpack: () => boolean;
  /** Aborted when the instance is stopped while preparing; handed to the unpacker. */
  signal: AbortSignal;
}

/**
 * Makes the working directory ready: a dynamic instance's is removed first, so it starts empty;
 * a static one's is kept and the unpacker is told whether it existed (`freshDirectory`); then the
 * templates are unpacked and, for platforms that take the port from a file, the port is written
 * into it (other keys of an existing file kept). Rejects with the first failure.
 */
export async function prepareWorkDirectory(plan: WorkDirectoryPlan): Promise<void> {
  const { spec, platform, workDir } = plan;
  if (!spec.static) await removeWorkDirectory(workDir);
  const freshDirectory = !(await pathExists(workDir));
  await mkdir(workDir, { recursive: true });
  if (plan.unpackTemplates !== undefined && plan.shouldUnpack()) {
    await plan.unpackTemplates({
      instanceId: spec.instanceId,
      group: spec.group,
      workDir,
      templates: spec.templates,
      variables: { ...(spec.variables ?? {}), ...instancePlaceholders(spec) },
      freshDirectory,
      signal: plan.signal,
      ...(spec.buildSha256 ? { build: { sha256: spec.buildSha256, fileName: spec.jarFile ?? "server.jar" } } : {}),
    });
  }
  if (platform.portPassing === "file" && platform.portFile !== undefined) {
    const file = join(workDir, platform.portFile.path);
    const existing = (await pathExists(file)) ? await readFile(file, "utf8") : null;
    await writeFile(file, patchPropertiesPort(existing, platform.portFile.key, spec.port));
  }
}

/**
 * The `{{placeholders}}` every instance's template files get, whatever the templates define: the
 * facts of this instance win over a template variable of the same name (a template cannot give an
 * instance a wrong port). Documented in docs/decisions/templates.md ("Placeholders").
 */
export function instancePlaceholders(
  spec: Pick<InstanceSpec, "instanceId" | "group" | "port" | "memoryMb" | "platform">,
): Record<(typeof INSTANCE_PLACEHOLDERS)[number], string> {
  return { instanceId: spec.instanceId, group: spec.group, port: String(spec.port), memoryMb: String(spec.memoryMb), platform: spec.platform };
}

/** Removes a working directory and everything in it (retried a few times; absent is fine). */
export async function removeWorkDirectory(workDir: string): Promise<void> {
  await rm(workDir, { recursive: true, force: true, maxRetries: 3 });
}

/** Whether `path` exists, without blocking the event loop (instance starts run while servers report). */
async function pathExists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

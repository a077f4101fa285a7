/** The environment an instance's process starts with. */
import type { PlatformDefinition } from "./platforms.js";
import type { InstanceSpec } from "./runner-types.js";
import { INSTANCE_ENV } from "./simulated-server/contract.js";

/** Daemon environment variables passed through to instances unless configured otherwise. */
export const inheritedEnvNamesDefault: readonly string[] = ["PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "JAVA_HOME"];

/** What {@link instanceEnvironment} builds from. */
export interface InstanceEnvironmentInput {
  spec: InstanceSpec;
  platform: PlatformDefinition;
  /** The daemon's own environment (only `inheritEnvNames` are read from it). */
  daemonEnv: NodeJS.ProcessEnv;
  inheritEnvNames: readonly string[];
  /** The runner's controller URL, used when the spec names none. */
  controllerUrl: string | null | undefined;
}

/**
 * The instance's environment, later layers winning: the inherited daemon variables, the
 * platform's, the spec's, then the instance variables the runner owns (CLOUD_INSTANCE_ID, group,
 * port, memory, the controller URL when known, the workload token when given). Nothing else of the
 * daemon's environment reaches the instance. Pure.
 */
export function instanceEnvironment(input: InstanceEnvironmentInput): NodeJS.ProcessEnv {
  const { spec, platform } = input;
  const env: NodeJS.ProcessEnv = {};
  for (const name of input.inheritEnvNames) {
    const value = input.daemonEnv[name];
    if (value !== undefined) env[name] = value;
  }
  Object.assign(env, platform.env ?? {}, spec.env ?? {});
  env[INSTANCE_ENV.instanceId] = spec.instanceId;
  env[INSTANCE_ENV.group] = spec.group;
  env[INSTANCE_ENV.port] = String(spec.port);
  env[INSTANCE_ENV.memoryMb] = String(spec.memoryMb);
  const controllerUrl = spec.controllerUrl || input.controllerUrl;
  if (controllerUrl) env[INSTANCE_ENV.controllerUrl] = controllerUrl;
  if (spec.workloadToken) env[INSTANCE_ENV.workloadToken] = spec.workloadToken;
  if (spec.platformVersion) env[INSTANCE_ENV.platformVersion] = spec.platformVersion;
  return env;
}

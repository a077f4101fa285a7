/**
 * What the instance runner takes and reports, as plain shapes: the spec of an instance, the
 * template unpacker it calls, the timers it is given, its events, snapshots and exits. The runner
 * and its parts import these; callers import them through `instance-runner.ts`.
 */
import type { ConsoleLine } from "./console-buffer.js";
import type { CrashClassification } from "./crash-classification.js";

/** States the runner reports; SCHEDULED and DRAINING are controller-side only. */
export type InstanceRunState = "PREPARING" | "STARTING" | "RUNNING" | "STOPPING" | "STOPPED" | "CRASHED";

/** One template layer to unpack: a template name, at a content hash or (without one) its current version. */
export interface TemplateLayerRef {
  name: string;
  hash?: string;
}

/** What the controller asks the daemon to run. */
export interface InstanceSpec {
  instanceId: string;
  group: string;
  /** A platform id known to the runner. */
  platform: string;
  port: number;
  memoryMb: number;
  /** Default `server.jar`. */
  jarFile?: string;
  /** Persistent working directory `static/<group>/<instanceId>` instead of a temporary one. */
  static: boolean;
  /** Layers in the order they apply. */
  templates: readonly TemplateLayerRef[];
  /** Per-instance credential for the plugin API; passed as CLOUD_WORKLOAD_TOKEN, never logged. */
  workloadToken?: string;
  /** Extra environment for this instance (wins over the platform's). */
  env?: Readonly<Record<string, string>>;
  /** `{{var}}` substitutions handed to the unpacker. */
  variables?: Readonly<Record<string, string>>;
  /** Overrides the runner's controllerUrl for this instance (CLOUD_CONTROLLER_URL). */
  controllerUrl?: string;
  /** The group's platform version (CLOUD_PLATFORM_VERSION). */
  platformVersion?: string;
  /** A catalog build (by sha256) placed at `jarFile` after the templates are unpacked. */
  buildSha256?: string;
}

/** Input of the injected template unpacker. */
export interface TemplateUnpackRequest {
  instanceId: string;
  group: string;
  workDir: string;
  templates: readonly TemplateLayerRef[];
  variables: Readonly<Record<string, string>>;
  /** False when a static instance's persistent directory already existed (its data must survive). */
  freshDirectory: boolean;
  /** Aborted when the instance is stopped while preparing. */
  signal: AbortSignal;
  /** A catalog build to place in the directory after the layers: its sha256 and the file name (the spec's jarFile). */
  build?: { sha256: string; fileName: string };
}

/** Unpacks template layers into a working directory (the template cache provides it). */
export type TemplateUnpacker = (request: TemplateUnpackRequest) => Promise<void>;

/** Why an instance ended unexpectedly (crash record / INSTANCE_CRASHED). */
export interface CrashReport {
  instanceId: string;
  group: string;
  exitCode: number | null;
  signal: string | null;
  classification: CrashClassification;
  /** The last console lines, oldest first. */
  logTail: string[];
  /** From spawn to exit; 0 when the process never ran. */
  uptimeMs: number;
  timestampMs: number;
  /** Set for PREPARE_FAILED and SPAWN_FAILED. */
  reason?: string;
}

/** Everything the runner reports. */
export type RunnerEvent =
  | {
      type: "state";
      instanceId: string;
      group: string;
      state: InstanceRunState;
      previousState: InstanceRunState | null;
      timestampMs: number;
      /** The instance's port (from its spec). */
      port: number;
      /** Set with STOPPED and CRASHED when a process ran. */
      exitCode?: number | null;
      signal?: string | null;
      pid?: number;
    }
  | ({ type: "console"; instanceId: string; group: string } & ConsoleLine)
  | { type: "crash"; report: CrashReport };

/** A read-only view of one live instance. */
export interface InstanceSnapshot {
  instanceId: string;
  group: string;
  platform: string;
  state: InstanceRunState;
  port: number;
  pid: number | null;
  workDir: string;
  static: boolean;
  spawnedAtMs: number | null;
  readyAtMs: number | null;
}

/** How an instance ended. */
export interface InstanceExit {
  instanceId: string;
  state: "STOPPED" | "CRASHED";
  exitCode: number | null;
  signal: string | null;
  crash: CrashReport | null;
}

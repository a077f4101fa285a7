/**
 * Maps the daemon stream's instance commands onto the instance runner and answers each at once:
 * a start is answered when the runner accepted it (PREPARING), a stop when the stop began — what
 * follows arrives as instance state reports. A refusal is a result with the runner's stable code
 * (STALE_EPOCH, UNKNOWN_INSTANCE, …). Decisions: docs/decisions/daemon-runner.md.
 */
import type { CommandResult, InstanceSpec as WireInstanceSpec } from "../wire/daemon-proto.js";
import type { CommandHandler } from "./gateway-client.js";
import { InstanceListing, type ListedRunner } from "./instance-listing.js";
import type { InstanceLogStore } from "./instance-logs.js";
import type { InstanceRunner, InstanceSpec } from "./instance-runner.js";
import { RunnerError } from "./runner-errors.js";

/** The runner calls the handler makes (`list_instances` reads the runner through {@link InstanceListing}). */
export type CommandRunner = Pick<
  InstanceRunner,
  "start" | "stop" | "forceStop" | "writeStdin" | "markReady" | "observeFencingToken" | "snapshot" | "validate"
> &
  ListedRunner;

export interface CommandHandlerOptions {
  runner: CommandRunner;
  /** CLOUD_CONTROLLER_URL for an instance whose spec names none (the daemon's plugin relay); null when unknown. */
  controllerUrl: () => string | null;
  /** The instance logs: read by read_instance_log, and told why a start was refused. */
  instanceLogs?: Pick<InstanceLogStore, "read" | "note">;
}

type Result = Omit<CommandResult, "command_id">;

const ok = (message = ""): Result => ({ ok: true, error_code: "", message });

/**
 * The runner's spec for a wire spec. Layers come from `templates` (name and optional hash);
 * a spec with only `template_hashes` is refused (INVALID_SPEC): the template routes fetch by name,
 * so unnamed layers cannot be unpacked. Empty strings mean "not set".
 */
export function toRunnerSpec(spec: WireInstanceSpec, defaultControllerUrl: string | null): InstanceSpec {
  const templates = spec.templates ?? [];
  if (templates.length === 0 && (spec.template_hashes ?? []).length > 0) {
    throw new RunnerError(
      "INVALID_SPEC",
      `Instance ${spec.instance_id}: template layers need names (InstanceSpec.templates); template_hashes alone cannot be fetched`,
    );
  }
  for (const layer of templates) {
    if (layer.name === "") throw new RunnerError("INVALID_SPEC", `Instance ${spec.instance_id}: a template layer has no name`);
  }
  const controllerUrl = spec.controller_url || defaultControllerUrl;
  return {
    instanceId: spec.instance_id,
    group: spec.group,
    platform: spec.platform,
    port: spec.port,
    memoryMb: spec.memory_mb,
    static: spec.static,
    templates: templates.map((layer) => (layer.hash ? { name: layer.name, hash: layer.hash } : { name: layer.name })),
    env: { ...(spec.environment ?? {}) },
    variables: { ...(spec.variables ?? {}) },
    ...(spec.jar_file ? { jarFile: spec.jar_file } : {}),
    ...(spec.platform_version ? { platformVersion: spec.platform_version } : {}),
    ...(spec.build_sha256 ? { buildSha256: spec.build_sha256 } : {}),
    ...(spec.workload_token ? { workloadToken: spec.workload_token } : {}),
    ...(controllerUrl ? { controllerUrl } : {}),
  };
}

/** The {@link CommandHandler} of `cloud-daemon`. */
export function createCommandHandler(options: CommandHandlerOptions): CommandHandler {
  const { runner } = options;
  const listing = new InstanceListing(runner);

  const specFor = (header: { group: string }, wire: WireInstanceSpec | null | undefined): InstanceSpec => {
    if (!wire) throw new RunnerError("INVALID_SPEC", "The command carries no instance spec");
    const spec = toRunnerSpec(wire, options.controllerUrl());
    if (spec.group !== header.group)
      throw new RunnerError("INVALID_SPEC", `Instance ${spec.instanceId}: spec group ${spec.group} differs from the command's group ${header.group}`);
    return spec;
  };

  /** The command's group must be the instance's: its fencing token is compared with that group's. */
  const checkGroup = (instanceId: string, group: string): void => {
    const actual = runner.snapshot(instanceId).group;
    if (actual !== group) throw new RunnerError("INVALID_COMMAND", `Instance ${instanceId} belongs to group ${actual}, not ${group}`);
  };

  const start = (spec: InstanceSpec, fencingToken: number): Result => {
    try {
      runner.start(spec, fencingToken);
      return ok();
    } catch (error) {
      if (!(error instanceof RunnerError) || error.code !== "INSTANCE_EXISTS") throw error;
    }
    // A controller retries dispatches it got no answer for: the same start again is not an error.
    const existing = runner.snapshot(spec.instanceId);
    if (existing.group !== spec.group)
      throw new RunnerError("INSTANCE_EXISTS", `Instance ${spec.instanceId} is already on this node in group ${existing.group}`);
    runner.observeFencingToken(spec.group, fencingToken);
    if (existing.state === "STOPPING") throw new RunnerError("INVALID_STATE", `Instance ${spec.instanceId} is stopping`);
    return ok(`already on this node (${existing.state})`);
  };

  /** A start the daemon refuses leaves its reason in the instance's log, where `cloudctl logs` finds it. */
  const noteRefusal = (instanceId: string | undefined, error: unknown): void => {
    if (instanceId && error instanceof RunnerError && error.code !== "INSTANCE_EXISTS" && error.code !== "STALE_EPOCH") {
      options.instanceLogs?.note(instanceId, `start refused: ${error.code}: ${error.message}`);
    }
  };

  const readLog = async (instanceId: string, tailLines: number): Promise<Result> => {
    const lines = options.instanceLogs ? await options.instanceLogs.read(instanceId, tailLines || 200) : null;
    if (lines === null) return { ok: false, error_code: "NOT_FOUND", message: `No log of instance ${instanceId} on this node` };
    return { ...ok(), log_lines: lines.map((l) => ({ instance_id: instanceId, stream: l.stream, line: l.line, timestamp_ms: l.timestampMs, sequence: 0 })) };
  };

  const handle = (command: Parameters<CommandHandler>[0]): Result | Promise<Result> => {
    switch (command.type) {
      case "prepare_instance": {
        try {
          const spec = specFor(command.body, command.body.spec);
          runner.validate(spec);
          runner.observeFencingToken(spec.group, command.body.fencing_token);
        } catch (error) {
          noteRefusal(command.body.spec?.instance_id, error);
          throw error;
        }
        return ok();
      }
      case "start_instance":
        try {
          return start(specFor(command.body, command.body.spec), command.body.fencing_token);
        } catch (error) {
          noteRefusal(command.body.spec?.instance_id, error);
          throw error;
        }
      case "stop_instance":
      case "force_stop_instance": {
        const { instance_id: instanceId, group, fencing_token: fencingToken } = command.body;
        checkGroup(instanceId, group);
        // Accepted is enough: the exit is reported as STOPPED when the process is gone.
        const exit = command.type === "stop_instance" ? runner.stop(instanceId, fencingToken) : runner.forceStop(instanceId, fencingToken);
        void exit;
        return ok();
      }
      case "stdin_instance":
        checkGroup(command.body.instance_id, command.body.group);
        runner.writeStdin(command.body.instance_id, command.body.line, command.body.fencing_token);
        return ok();
      case "mark_instance_ready":
        checkGroup(command.body.instance_id, command.body.group);
        runner.markReady(command.body.instance_id, command.body.fencing_token);
        return ok();
      case "list_instances":
        // A read: no fencing token, nothing changes.
        return { ...ok(), instances: listing.list() };
      case "read_instance_log":
        return readLog(command.body.instance_id, command.body.tail_lines);
    }
  };

  return async (command) => {
    try {
      return await handle(command);
    } catch (error) {
      if (error instanceof RunnerError) return { ok: false, error_code: error.code, message: error.message };
      throw error;
    }
  };
}

/**
 * `cloudctl deploy <group>` (spec document 2: --strategy, --batch-size, --canary-instances,
 * --canary-percent, --health-gate, --min-healthy, --auto-rollback, --promotion-timeout, --yes) and
 * `deploy list|show|pause|resume|promote|rollback`. `--watch` follows a deployment until it
 * finishes: exit 0 when it COMPLETED, 1 when it was rolled back or failed.
 */
import type { Command } from "commander";
import { CliError } from "../exit-codes.js";
import { listOf, segment, type HttpClient } from "../http-client.js";
import { collect, parseCount } from "../options.js";
import { display } from "../render.js";
import { changedLines, changeFacts, renderDeployment, type DeploymentView } from "./deploy-view.js";
import type { Runtime, RuntimeFactory } from "../runtime.js";

/** Refresh period of `--watch`. */
export const deployWatchIntervalMs = 2_000;
const strategies = ["ROLLING", "RECREATE"];
const finishedStates = new Set(["COMPLETED", "ROLLED_BACK", "FAILED"]);

interface DeployFlags {
  strategy?: string;
  batchSize?: number;
  canaryInstances?: number;
  canaryPercent?: number;
  healthGate?: boolean;
  minHealthy?: number;
  autoRollback?: boolean;
  promotionTimeout?: number;
  template: string[];
  memory?: number;
  yes?: boolean;
  watch?: boolean;
}

const deploymentsPath = (group: string) => `/api/v1/groups/${segment(group)}/deployments`;

/** The create body from the flags; a CliError (exit 1) for a value the spec's bounds refuse. */
export function deployBody(flags: DeployFlags): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  if (flags.strategy !== undefined) {
    const strategy = flags.strategy.toUpperCase();
    if (!strategies.includes(strategy)) throw new CliError(`--strategy must be one of ${strategies.join(", ")}`);
    body.strategy = strategy;
  }
  if (flags.batchSize !== undefined) {
    if (flags.batchSize < 1) throw new CliError("--batch-size must be at least 1");
    body.batchSize = flags.batchSize;
  }
  if (flags.canaryInstances !== undefined && flags.canaryPercent !== undefined) throw new CliError("--canary-instances and --canary-percent are exclusive");
  if (flags.canaryInstances !== undefined) body.canaryInstances = flags.canaryInstances;
  if (flags.canaryPercent !== undefined) {
    if (flags.canaryPercent > 100) throw new CliError("--canary-percent must be between 0 and 100");
    body.canaryPercent = flags.canaryPercent;
  }
  if (flags.healthGate !== undefined) body.healthGate = flags.healthGate;
  if (flags.minHealthy !== undefined) body.minHealthySeconds = flags.minHealthy;
  if (flags.autoRollback) body.autoRollback = true;
  if (flags.promotionTimeout !== undefined) {
    if (flags.promotionTimeout < 1) throw new CliError("--promotion-timeout must be at least 1");
    body.promotionTimeoutSeconds = flags.promotionTimeout;
  }
  const changes: Record<string, unknown> = {};
  if (flags.template.length > 0) changes.templates = flags.template;
  if (flags.memory !== undefined) changes.memoryMb = flags.memory;
  if (Object.keys(changes).length > 0) body.changes = changes;
  return body;
}

/**
 * Follows the deployment until it finishes; exit 0 when it COMPLETED, 1 when it was rolled back
 * or failed. A terminal gets the whole view every {@link deployWatchIntervalMs}; anything else one
 * timestamped line per change (commands/deploy-view.ts).
 */
async function watchDeployment(rt: Runtime, client: HttpClient, group: string, revision: number): Promise<void> {
  const terminal = rt.io.stdoutIsTty && !rt.json;
  let previous: Map<string, string> | null = null;
  for (;;) {
    const d = (await client.get<DeploymentView>(`${deploymentsPath(group)}/${revision}`)).data!;
    if (rt.json) rt.out.line(JSON.stringify(d));
    else if (terminal) {
      process.stdout.write("\x1b[2J\x1b[H");
      rt.out.line(rt.out.colors.dim(`every ${deployWatchIntervalMs / 1000}s · ${new Date().toISOString()} · Ctrl-C to stop watching (the rollout goes on)`));
      renderDeployment(rt.out, d, Date.now());
    } else {
      const facts = changeFacts(d);
      const stamp = new Date().toISOString().slice(11, 19);
      for (const line of changedLines(previous, facts)) rt.out.line(`${stamp} ${line}`);
      previous = facts;
    }
    if (finishedStates.has(d.state) && d.phase === "DONE") {
      if (d.state !== "COMPLETED") throw new CliError(`deployment ${revision} of ${group} ${d.state}${d.reason ? `: ${d.reason}` : ""}`);
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, deployWatchIntervalMs));
  }
}

/** Registers `deploy`. */
export function registerDeployCommands(program: Command, runtime: RuntimeFactory): void {
  const deploy = program
    .command("deploy")
    .description("roll a group out to a new revision (an unchanged group is a rolling restart), and follow, pause, resume, promote or roll back")
    .argument("[group]", "the group to roll out")
    .option("--strategy <strategy>", "ROLLING or RECREATE (default: the group's updateStrategy)")
    .option("--batch-size <n>", "instances replaced at once (at least 1; default 1)", parseCount)
    .option("--canary-instances <n>", "new instances that run beside the old ones until promoted (at least 0)", parseCount)
    .option("--canary-percent <p>", "canaries as a percentage of the group (0 to 100; exclusive with --canary-instances)", parseCount)
    .option("--health-gate", "a new instance counts once RUNNING for --min-healthy seconds without a crash (the default)")
    .option("--no-health-gate", "a new instance counts once RUNNING, and crashes do not stop the rollout")
    .option("--min-healthy <s>", "seconds a new instance must serve without a crash (default 10)", parseCount)
    .option("--auto-rollback", "a failed health gate returns the group to the previous revision")
    .option("--promotion-timeout <s>", "promote healthy canaries after this many seconds (at least 1; default: only `deploy promote`)", parseCount)
    .option("--template <name>", "template layers of the new revision, in order (repeatable; default: the group's)", collect, [])
    .option("--memory <mb>", "memory of the new revision's instances in MB (default: the group's)", parseCount)
    .option("-y, --yes", "do not ask for confirmation")
    .option("--watch", "follow the rollout until it finishes: batch, health-gate countdown, per-instance state (one line per change when not on a terminal)")
    .action(async (group: string | undefined, flags: DeployFlags, cmd: Command) => {
      if (!group) throw new CliError("deploy needs a group: cloudctl deploy <group> [flags], or a subcommand (see --help)");
      const rt = runtime(cmd);
      const body = deployBody(flags);
      const what = body.changes ? `a new revision (${JSON.stringify(body.changes)})` : "a new revision of its current settings (a rolling restart)";
      await rt.confirm(`Roll group "${group}" out to ${what}?`, flags.yes);
      const client = rt.client();
      const response = await client.post<DeploymentView>(deploymentsPath(group), body);
      if (rt.json && !flags.watch) return rt.out.raw(response.raw);
      const created = response.data!;
      if (!rt.json) rt.out.success(`deployment of ${rt.out.accent(group)} to revision ${created.revision} started`);
      if (flags.watch) await watchDeployment(rt, client, group, created.revision);
    });

  deploy
    .command("list <group>")
    .alias("ls")
    .description("the group's deployments, newest first")
    .action(async (group: string, _opts, cmd: Command) => {
      const rt = runtime(cmd);
      const response = await rt.client().get(deploymentsPath(group));
      if (rt.json) return rt.out.raw(response.raw);
      const o = rt.out;
      o.table(
        ["REVISION", "STATE", "PHASE", "FROM", "CREATED", "REASON"],
        listOf<DeploymentView>(response.data).map((d) => [
          d.revision,
          o.state(d.state),
          display(d.phase),
          display(d.previousRevision),
          display(d.createdAt),
          display(d.reason),
        ]),
      );
    });

  deploy
    .command("show <group> <revision>")
    .description("one deployment with its per-instance progress")
    .option("--watch", "follow it until it finishes")
    .action(async (group: string, revision: string, opts: { watch?: boolean }, cmd: Command) => {
      const rt = runtime(cmd);
      const client = rt.client();
      const rev = parseRevision(revision);
      // `deploy` has --watch too, and commander gives the flag to it when it follows the subcommand.
      const watch = opts.watch ?? (cmd.parent?.opts() as { watch?: boolean } | undefined)?.watch;
      if (watch && !rt.json) return watchDeployment(rt, client, group, rev);
      const response = await client.get<DeploymentView>(`${deploymentsPath(group)}/${rev}`);
      if (rt.json) return rt.out.raw(response.raw);
      renderDeployment(rt.out, response.data!, Date.now());
    });

  const control = (verb: string, help: string, body?: (opts: Record<string, unknown>) => Record<string, unknown>, extra?: (c: Command) => Command) => {
    let command = deploy.command(`${verb} <group> <revision>`).description(help);
    if (extra) command = extra(command);
    command.action(async (group: string, revision: string, opts: Record<string, unknown>, cmd: Command) => {
      const rt = runtime(cmd);
      const rev = parseRevision(revision);
      const response = await rt.client().post<DeploymentView>(`${deploymentsPath(group)}/${rev}/${verb}`, body ? body(opts) : undefined);
      if (rt.json) return rt.out.raw(response.raw);
      rt.out.success(`deployment ${rev} of ${rt.out.accent(group)}: ${response.data?.state ?? verb}`);
    });
  };
  control("pause", "pause a rollout: nothing more is started or retired");
  control("resume", "resume a paused rollout");
  control("promote", "promote the canaries: the rollout replaces the rest");
  control(
    "rollback",
    "stop a rollout (ROLLED_BACK); new instances start from the previous revision again",
    (opts) => ({ restore: opts.restore === true }),
    (c) => c.option("--restore", "also replace the new revision's instances by the previous revision"),
  );
}

function parseRevision(value: string): number {
  if (!/^[1-9][0-9]{0,9}$/.test(value)) throw new CliError(`revision must be a positive integer: ${value}`);
  return Number(value);
}

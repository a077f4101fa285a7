/**
 * Commands sent to one daemon and awaiting its result: each is bounded by a deadline, their number
 * by `pendingCommandsMax`, and all of them are failed when the session ends.
 */
import { randomUUID } from "node:crypto";
import type { CommandResult } from "../wire/daemon-proto.js";
import { GatewayError } from "./gateway-errors.js";
import { systemClock, type Clock, type Timer } from "../shared/clock.js";

interface PendingCommand {
  resolve(result: CommandResult): void;
  reject(error: GatewayError): void;
  timer: Timer;
}

/**
 * The commands of one node's session that wait for a `command_result`. {@link dispatch} gives a
 * command its id and deadline and hands it to the caller's send function; the promise it returns
 * settles with the daemon's result or a {@link GatewayError}: QUEUE_FULL (too many waiting, or the
 * send was refused), COMMAND_TIMEOUT (no result by the deadline) or NODE_DISCONNECTED (via
 * {@link rejectAll}). A result for an id not waiting (late, unknown) is ignored.
 */
export class PendingCommands {
  private readonly pending = new Map<string, PendingCommand>();

  constructor(
    private readonly nodeId: string,
    private readonly pendingCommandsMax: number,
    private readonly clock: Clock = systemClock,
  ) {}

  /** Commands waiting for their result. */
  get size(): number {
    return this.pending.size;
  }

  /**
   * Registers a command of type `commandType` under a fresh id and calls `send(commandId)`, which
   * answers whether the message was queued on the stream.
   */
  dispatch(commandType: string, timeoutMs: number, send: (commandId: string) => boolean): Promise<CommandResult> {
    if (this.pending.size >= this.pendingCommandsMax) {
      return Promise.reject(new GatewayError("QUEUE_FULL", `Too many commands awaiting results from node ${this.nodeId}`));
    }
    const commandId = randomUUID();
    return new Promise<CommandResult>((resolve, reject) => {
      const timer = this.clock.setTimeout(() => {
        this.pending.delete(commandId);
        reject(new GatewayError("COMMAND_TIMEOUT", `Node ${this.nodeId} did not answer command ${commandType} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(commandId, { resolve, reject, timer });
      if (!send(commandId)) {
        timer.cancel();
        this.pending.delete(commandId);
        reject(new GatewayError("QUEUE_FULL", `The outbound queue of node ${this.nodeId} is full`));
      }
    });
  }

  /** Settles the command `result` answers; false when no command with its id is waiting. */
  resolve(result: CommandResult): boolean {
    const pending = this.pending.get(result.command_id);
    if (!pending) return false;
    this.pending.delete(result.command_id);
    pending.timer.cancel();
    pending.resolve(result);
    return true;
  }

  /** Fails every waiting command with NODE_DISCONNECTED, naming `reason`. */
  rejectAll(reason: string): void {
    for (const [id, pending] of this.pending) {
      pending.timer.cancel();
      pending.reject(new GatewayError("NODE_DISCONNECTED", `Node ${this.nodeId} disconnected before answering (${reason})`));
      this.pending.delete(id);
    }
  }
}

/**
 * Instance commands arriving on the daemon stream: taken out of their controller message, run by
 * the injected {@link CommandHandler} (in a server span continuing the controller's `traceparent`
 * when tracing is on), their result written back as `command_result`.
 */
import type { CommandResult, ControllerMessage, InstanceCommand } from "../wire/daemon-proto.js";
import { SpanKind, SpanStatusCode, type Tracing } from "../shared/tracing.js";
import type { CommandHandler } from "./gateway-client-types.js";

/** The controller message cases that are instance commands. */
export type InstanceCommandType = InstanceCommand["type"];

type CommandOutcome = Omit<CommandResult, "command_id">;
type IdentifiedCommand = InstanceCommand & { commandId: string };

/**
 * Runs the command of `message` (whose payload is `type`) and hands its result to `deliver`, which
 * writes it on the stream the command came from if that stream is still the current one.
 */
export function handleInstanceCommand(
  message: ControllerMessage,
  type: InstanceCommandType,
  handler: CommandHandler | undefined,
  tracing: Tracing | undefined,
  deliver: (commandId: string, result: CommandOutcome) => void,
): void {
  const body = (message as unknown as Record<string, { command_id: string }>)[type]!;
  const command = { type, body, commandId: body.command_id, traceparent: message.traceparent ?? "" } as unknown as IdentifiedCommand;
  if (tracing?.enabled) {
    void tracing.inSpan(`handle ${type}`, { kind: SpanKind.SERVER, traceparent: command.traceparent, attributes: { "cloud.command": type } }, async (span) => {
      const result = await dispatch(handler, command, deliver);
      if (!result.ok) {
        span.setAttribute("cloud.error_code", result.error_code);
        span.setStatus({ code: SpanStatusCode.ERROR, message: result.error_code });
      }
    });
  } else void dispatch(handler, command, deliver);
}

async function dispatch(
  handler: CommandHandler | undefined,
  command: IdentifiedCommand,
  deliver: (commandId: string, result: CommandOutcome) => void,
): Promise<CommandOutcome> {
  let result: CommandOutcome;
  if (!handler) {
    result = { ok: false, error_code: "UNSUPPORTED", message: "This daemon has no instance runner" };
  } else {
    try {
      result = await handler(command);
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      result = { ok: false, error_code: typeof code === "string" ? code : "INTERNAL", message: (err as Error).message };
    }
  }
  deliver(command.commandId, result);
  return result;
}

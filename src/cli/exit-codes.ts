/**
 * Process exit codes of cloudctl and the error type commands throw to choose one.
 *
 * 0 success; 1 generic failure (validation, IO, and every HTTP status other than 401, 403 and
 * 404, including 409 and 422); 2 for 401 (and for "not signed in" and a refused console ticket); 3
 * for 403; 4 for 404; 5 when the controller could not be reached at all (connection refused, DNS
 * failure, timeout); 6 when a confirmation was declined or could not be asked (nothing was done);
 * 64 (sysexits EX_USAGE) when the command line itself is wrong (unknown command or flag, a missing
 * or extra argument, a flag value of the wrong form): nothing was sent.
 */
export const ExitCode = {
  ok: 0,
  failure: 1,
  unauthorized: 2,
  forbidden: 3,
  notFound: 4,
  connection: 5,
  cancelled: 6,
  usage: 64,
} as const;

/** Any value of {@link ExitCode}. */
export type ExitCodeValue = (typeof ExitCode)[keyof typeof ExitCode];

/** Maps an HTTP status of a failed response to the exit code the spec assigns it. */
export function exitCodeForStatus(status: number): ExitCodeValue {
  if (status === 401) return ExitCode.unauthorized;
  if (status === 403) return ExitCode.forbidden;
  if (status === 404) return ExitCode.notFound;
  return ExitCode.failure;
}

/** An expected failure of a command: the message is printed to stderr and the process exits with `exitCode`. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: ExitCodeValue = ExitCode.failure,
  ) {
    super(message);
    this.name = "CliError";
  }
}

/** Help text listing the exit codes; appended to `cloudctl --help`. */
export const exitCodesHelp = `Exit codes:
  0  success
  1  generic failure (validation, IO, parse; any HTTP error other than 401, 403, 404)
  2  not authenticated (HTTP 401, no token for a command that needs one, a console or event-stream ticket refused)
  3  permission denied (HTTP 403)
  4  not found (HTTP 404)
  5  controller unreachable (connection refused, DNS failure, timeout)
  6  cancelled: a confirmation was answered No, or stdin is not a terminal and --yes was not given
 64  usage error: unknown command or flag, missing or extra argument, malformed flag value`;

/** A confirmation answered No (or one that could not be asked): nothing was done, exit 6. */
export class CancelledError extends CliError {
  constructor(message = "cancelled") {
    super(message, ExitCode.cancelled);
    this.name = "CancelledError";
  }
}

/** A command line that cannot be right (exit 64): nothing was sent. */
export function usageError(message: string): CliError {
  return new CliError(message, ExitCode.usage);
}

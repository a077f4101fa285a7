/** Errors of the plugin SDK. Expected failures carry a stable `code`, like the controller's error envelope. */

/** A call of the plugin API that did not succeed: an error envelope, an unexpected status, a timeout or no connection. */
export class CloudApiError extends Error {
  /** HTTP status; 0 when no answer came (timeout, connection failure). */
  readonly status: number;
  /** The envelope's code (`NOT_FOUND`, `VALIDATION_ERROR`, …), `TIMEOUT`, `CONNECTION_FAILED` or `UNEXPECTED_STATUS`. */
  readonly code: string;

  constructor(status: number, code: string, message: string) {
    super(message);
    this.name = "CloudApiError";
    this.status = status;
    this.code = code;
  }

  /** True when the controller never took the request (no answer) or failed on its side (5xx): sending again may help. */
  get retriable(): boolean {
    return this.status === 0 || this.status >= 500;
  }
}

/** A caller's argument the SDK refuses (the spec's invalid-argument), e.g. fetchInstance of an unknown id. */
export class InvalidArgumentError extends Error {
  readonly code = "INVALID_ARGUMENT";

  constructor(message: string) {
    super(message);
    this.name = "InvalidArgumentError";
  }
}

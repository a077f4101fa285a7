/** The outcome of a transfer request (spec document 3, "Plugin-side objects"). */
export class TransferResult {
  private constructor(
    /** True once the controller queued the move (not on the player's arrival). */
    readonly success: boolean,
    /** The instance the player is sent to; null on failure, and when the controller did not name it. */
    readonly targetInstanceId: string | null,
    /**
     * Why the transfer was refused (`<CODE>: <message>` of the controller's error envelope) or, for
     * an outcome read from the event stream, why it failed (`TARGET_GONE`, `TIMEOUT`, …); null on success.
     */
    readonly failureReason: string | null,
    /** The controller's transfer id (the `id` of its Transfer); null when none was issued. */
    readonly transferId: string | null = null,
  ) {}

  static success(targetInstanceId: string | null, transferId: string | null = null): TransferResult {
    return new TransferResult(true, targetInstanceId, null, transferId);
  }

  static failure(reason: string, transferId: string | null = null): TransferResult {
    return new TransferResult(false, null, reason, transferId);
  }
}

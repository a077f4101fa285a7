/** The outcome of a transfer request (spec document 3, "Plugin-side objects"). */
export class TransferResult {
  private constructor(
    /** True once the controller queued the move (not on the player's arrival). */
    readonly success: boolean,
    /** The instance the player is sent to; null on failure, and when the controller did not name it. */
    readonly targetInstanceId: string | null,
    /** Why the transfer was refused (the controller's message); null on success. */
    readonly failureReason: string | null,
  ) {}

  static success(targetInstanceId: string | null): TransferResult {
    return new TransferResult(true, targetInstanceId, null);
  }

  static failure(reason: string): TransferResult {
    return new TransferResult(false, null, reason);
  }
}

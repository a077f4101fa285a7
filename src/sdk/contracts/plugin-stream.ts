/**
 * The frames of the plugin event stream addressed to one instance, besides the journal's events
 * (`src/plugin-api/plugin-stream.ts` writes them, the SDK's PluginEventStream reads them): one
 * declaration of their names and of the Transfer they carry. It lives in the SDK, which imports
 * nothing from the rest of the package.
 */

/** The frame saying the player registry's epoch changed while the stream is open (`{registryEpoch}`). */
export const REGISTRY_EPOCH_FRAME = "registry-epoch";

/** Frame names of the plugin event stream that carry a Transfer. */
export const TRANSFER_FRAME_EVENTS = ["transfer", "transfer-completed", "transfer-failed"] as const;
export type TransferFrameEvent = (typeof TRANSFER_FRAME_EVENTS)[number];

/** Where a transfer stands: waiting for the player's arrival, arrived, or given up. */
export type TransferState = "PENDING" | "COMPLETED" | "FAILED";

/** Why a transfer failed. */
export type TransferFailure = "TARGET_GONE" | "HOLDER_GONE" | "SUPERSEDED" | "TIMEOUT" | "PLAYER_LEFT";

/**
 * A transfer as the controller stores it, answers `transfer` / `transfer-to-group` (202) and sends it
 * on the plugin event stream (`event: transfer`, `transfer-completed`, `transfer-failed`).
 */
export interface Transfer {
  readonly id: string;
  readonly playerUuid: string;
  readonly playerName: string;
  /** The server the player was on when the transfer was asked for; null while only on a proxy. */
  readonly fromInstanceId: string | null;
  readonly targetInstanceId: string;
  /** The group the target was chosen from (`transfer-to-group`); null for a transfer to one instance. */
  readonly targetGroup: string | null;
  /** The instance that moves the player: its proxy, or the server it joined directly. */
  readonly holderInstanceId: string;
  /** The instance whose plugin asked. */
  readonly requestedBy: string;
  readonly requestedAt: string;
  readonly state: TransferState;
  /** Why it failed when FAILED; else null. */
  readonly failureReason: TransferFailure | null;
}

/**
 * Transfers addressed to this instance on the plugin event stream: `event: transfer` (a move this
 * instance has to carry out: it holds the player, as its proxy or as the server the player joined
 * directly), `event: transfer-completed` (the player arrived on the target) and `event:
 * transfer-failed` (to the holder and to the instance that asked; `failureReason` says why). The
 * controller sends every pending transfer again when a stream (re)connects, so delivery is at least
 * once: a transfer id already seen is not handed out again.
 */
import { TRANSFER_FRAME_EVENTS, type TransferFrameEvent } from "../contracts/plugin-stream.js";
import { TransferResult } from "./transfer-result.js";
import type { Subscription } from "./event-bus.js";
import { silentLogger, type SdkLogger, type Transfer } from "./types.js";

export { TRANSFER_FRAME_EVENTS, type TransferFrameEvent };
/** Transfer ids remembered for de-duplication; the oldest are forgotten beyond it. */
export const transferIdsRememberedMax = 10_000;
/** Default wait of {@link PluginTransfers.outcomeOf}: the controller gives a transfer 60 s, plus its sweep. */
export const transferOutcomeWaitMsDefault = 70_000;

export type TransferHandler = (transfer: Transfer) => void | Promise<void>;
export type TransferOutcomeHandler = (transfer: Transfer, result: TransferResult) => void;

/** The outcome of a transfer frame as a TransferResult. */
export function resultOf(transfer: Transfer): TransferResult {
  return transfer.state === "COMPLETED"
    ? TransferResult.success(transfer.targetInstanceId, transfer.id)
    : TransferResult.failure(transfer.failureReason ?? "FAILED", transfer.id);
}

function isTransfer(value: unknown): value is Transfer {
  const t = value as Partial<Transfer> | null;
  return (
    t !== null &&
    typeof t === "object" &&
    typeof t.id === "string" &&
    t.id !== "" &&
    typeof t.playerUuid === "string" &&
    typeof t.targetInstanceId === "string" &&
    typeof t.holderInstanceId === "string"
  );
}

export class PluginTransfers {
  /** Transfer id → whether its outcome arrived (insertion order: the oldest first). */
  private readonly seen = new Map<string, TransferResult | null>();
  /** Transfers whose handlers run now → whether the controller sent the transfer again meanwhile. */
  private readonly running = new Map<string, boolean>();
  private handlers: TransferHandler[] = [];
  private outcomeHandlers: TransferOutcomeHandler[] = [];
  private readonly waiters = new Map<string, ((result: TransferResult) => void)[]>();

  constructor(private readonly logger: SdkLogger = silentLogger) {}

  /** Transfers this instance has to carry out, each id once. */
  onTransfer(handler: TransferHandler): Subscription {
    this.handlers.push(handler);
    return { unsubscribe: () => (this.handlers = this.handlers.filter((h) => h !== handler)) };
  }

  /** Outcomes (completed or failed) of transfers this instance holds or asked for. */
  onOutcome(handler: TransferOutcomeHandler): Subscription {
    this.outcomeHandlers.push(handler);
    return { unsubscribe: () => (this.outcomeHandlers = this.outcomeHandlers.filter((h) => h !== handler)) };
  }

  /**
   * The outcome of transfer `id` once it reaches this instance's stream: completion reaches the
   * holder, failure the holder and the asker. After `timeoutMs` without one:
   * `TransferResult.failure("NO_OUTCOME")`.
   */
  outcomeOf(id: string, timeoutMs = transferOutcomeWaitMsDefault): Promise<TransferResult> {
    const known = this.seen.get(id);
    if (known) return Promise.resolve(known);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiters.set(
          id,
          (this.waiters.get(id) ?? []).filter((w) => w !== finish),
        );
        if (this.waiters.get(id)?.length === 0) this.waiters.delete(id);
        resolve(TransferResult.failure("NO_OUTCOME", id));
      }, timeoutMs);
      timer.unref?.();
      const finish = (result: TransferResult) => {
        clearTimeout(timer);
        resolve(result);
      };
      this.waiters.set(id, [...(this.waiters.get(id) ?? []), finish]);
    });
  }

  /** Hands one frame's transfer on (the event stream calls it). */
  deliver(event: string, data: unknown): void {
    if (!isTransfer(data)) {
      this.logger.warn(`Event stream: a ${event} frame without a transfer was skipped`);
      return;
    }
    if (event === "transfer") {
      // Sent again while its handlers still run (a reconnected stream re-sends what is pending):
      // remembered, so that it is carried out once more should this attempt fail.
      if (this.running.has(data.id)) return void this.running.set(data.id, true);
      if (this.seen.has(data.id)) return;
      this.carryOut(data);
      return;
    }
    if (event !== "transfer-completed" && event !== "transfer-failed") return;
    if (this.seen.get(data.id)) return;
    const result = resultOf(data);
    this.remember(data.id, result);
    for (const handler of [...this.outcomeHandlers]) {
      try {
        handler(data, result);
      } catch (error) {
        this.handlerFailed(error);
      }
    }
    for (const waiter of this.waiters.get(data.id) ?? []) waiter(result);
    this.waiters.delete(data.id);
  }

  /**
   * Hands a transfer to the handlers. When every handler failed, the transfer is handed out again
   * if the controller sends it again (a reconnected stream re-sends what is pending), or at once
   * when it was sent again while this attempt ran: a move cut short by a failover is retried.
   */
  private carryOut(data: Transfer): void {
    this.remember(data.id, null);
    this.running.set(data.id, false);
    const runs = [...this.handlers].map((handler) => {
      try {
        return Promise.resolve(handler(data));
      } catch (error) {
        return Promise.reject(error as Error);
      }
    });
    void Promise.allSettled(runs).then((settled) => {
      const resent = this.running.get(data.id) ?? false;
      this.running.delete(data.id);
      for (const run of settled) if (run.status === "rejected") this.handlerFailed(run.reason);
      if (settled.length === 0 || settled.some((run) => run.status === "fulfilled") || this.seen.get(data.id) !== null) return;
      this.seen.delete(data.id);
      if (resent) this.carryOut(data);
    });
  }

  private remember(id: string, result: TransferResult | null): void {
    this.seen.delete(id);
    this.seen.set(id, result);
    if (this.seen.size > transferIdsRememberedMax) this.seen.delete(this.seen.keys().next().value as string);
  }

  private handlerFailed(error: unknown): void {
    this.logger.warn(`Transfer handler threw: ${(error as Error)?.message ?? String(error)}`);
  }
}

/**
 * Reporting this instance's players again after the controller lost its player registry (a new
 * registry epoch on the event stream): a player-join for each player the PlayerManager holds locally,
 * through the client rules of every report (sequence numbers, retries), a few at a time so a full
 * proxy does not crowd out its other reports. A newer epoch arriving mid-way starts the round over;
 * a player that left meanwhile is skipped. Decisions: docs/decisions/plugin-sdk.md.
 */
import type { CloudClient } from "./cloud-client.js";
import type { PlayerManager } from "./players.js";
import { silentLogger, type SdkLogger } from "./types.js";

/** Player-join reports of one re-report round in flight at once. */
export const rejoinsInFlightMax = 4;

export class PlayerRejoiner {
  private round = 0;
  private running: Promise<void> = Promise.resolve();
  private rejoined = 0;

  constructor(
    private readonly client: Pick<CloudClient, "rejoinPlayer">,
    private readonly players: Pick<PlayerManager, "localPlayers" | "isLocal">,
    private readonly logger: SdkLogger = silentLogger,
    private readonly inFlightMax = rejoinsInFlightMax,
  ) {}

  /** Player-joins sent again so far. */
  get rejoinedCount(): number {
    return this.rejoined;
  }

  /** Reports every local player again; an earlier round still running stops taking players. Resolves when this round is done. */
  rejoinAll(): Promise<void> {
    const round = ++this.round;
    const queue = this.players.localPlayers();
    if (queue.length > 0) this.logger.info(`Reporting ${queue.length} player(s) again`);
    const worker = async () => {
      for (let next = queue.shift(); next !== undefined && round === this.round; next = queue.shift()) {
        if (!this.players.isLocal(next.uuid)) continue;
        this.rejoined += 1;
        await this.client.rejoinPlayer(next.uuid, next.name);
      }
    };
    this.running = Promise.all(Array.from({ length: Math.max(1, this.inFlightMax) }, worker)).then(() => undefined);
    return this.running;
  }

  /** Resolves when the latest round is done. */
  idle(): Promise<void> {
    return this.running;
  }
}

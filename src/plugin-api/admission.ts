/**
 * Who may come onto an instance (`POST /api/plugin/player-join`): the global maintenance switch
 * refuses players entering the network (403 MAINTENANCE), a group in maintenance refuses players
 * coming onto its instances (403 GROUP_MAINTENANCE). A player on the maintenance list, or whose
 * linked user holds `maintenance.bypass`, is admitted. A player already on the instance (a repeated
 * report) and a report marked `rejoin` (the registry lost a player the instance holds) are never
 * refused. docs/decisions/maintenance.md.
 */
import { isAllowedPlayer, type MaintenanceService } from "../domain/maintenance/maintenance-service.js";
import { DEFAULT_MAINTENANCE_MESSAGE } from "../domain/maintenance/maintenance-schemas.js";
import { ApiError } from "../shared/errors.js";
import type { OnlinePlayer } from "./players.js";

/** The instance a join is reported on, and its group's maintenance flag. */
export interface AdmissionTarget {
  instanceId: string;
  proxy: boolean;
  group: string;
  groupMaintenance: boolean;
}

export interface PlayerAdmissionDeps {
  maintenance: Pick<MaintenanceService, "current">;
  /** Whether the player's linked user may bypass maintenance; absent: nobody may. */
  bypasses?: (uuid: string) => Promise<boolean>;
}

/** A refused join: 403 with MAINTENANCE or GROUP_MAINTENANCE and the text the player is shown. */
export function admissionRefused(code: "MAINTENANCE" | "GROUP_MAINTENANCE", message: string): ApiError {
  return new ApiError(403, code, message);
}

/** Decides player joins; see the module comment. */
export class PlayerAdmission {
  constructor(private readonly deps: PlayerAdmissionDeps) {}

  /** Throws the refusal when `uuid` may not come onto `target`; `known` is the player's registry record. */
  async check(target: AdmissionTarget, uuid: string, name: string, known: OnlinePlayer | null): Promise<void> {
    const alreadyThere = known !== null && (target.proxy ? known.proxyInstanceId === target.instanceId : known.instanceId === target.instanceId);
    if (alreadyThere) return;
    const enteringNetwork = known === null || (known.instanceId === null && known.proxyInstanceId === null);
    const state = await this.deps.maintenance.current();
    const globalApplies = state.enabled && enteringNetwork;
    if (!globalApplies && !target.groupMaintenance) return;
    if (isAllowedPlayer(state, uuid, name)) return;
    if (this.deps.bypasses && (await this.deps.bypasses(uuid))) return;
    if (globalApplies) throw admissionRefused("MAINTENANCE", state.message ?? DEFAULT_MAINTENANCE_MESSAGE);
    throw admissionRefused("GROUP_MAINTENANCE", `Group ${target.group} is in maintenance and accepts no new players`);
  }
}

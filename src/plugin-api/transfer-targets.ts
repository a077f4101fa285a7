/**
 * Where a transfer may send a player, checked the same way for the plugins' transfer routes and the
 * operators' (`POST /api/v1/players/{uuid}/transfer`): the player must be online, the target an
 * unfinished, RUNNING, non-proxy instance outside a group in maintenance that the player is not
 * already on; a group must exist, not be a proxy group, not be in maintenance and have a RUNNING
 * instance, and the least-loaded one is taken.
 * A failed check is an {@link ApiError} (400, 404 or 409) and queues nothing.
 */
import type { GroupService } from "../domain/groups/group-service.js";
import type { InstanceService } from "../domain/instances/instance-service.js";
import { FINISHED_STATES } from "../domain/instances/instance-schemas.js";
import { badRequest, conflict, notFound } from "../shared/errors.js";
import { isProxyPlatform, type OnlinePlayer, type PlayerService } from "./players.js";

/** A player UUID in its canonical text form (any case). */
export const PLAYER_UUID_PATTERN = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

/** A checked transfer: who moves where (and, for a group transfer, which group). */
export interface TransferTarget {
  player: OnlinePlayer;
  targetInstanceId: string;
  targetGroup: string | null;
}

export interface TransferTargetDeps {
  instances: Pick<InstanceService, "getDoc" | "findDocs">;
  groups: Pick<GroupService, "getDoc" | "listDocs">;
  players: Pick<PlayerService, "get" | "countOn">;
}

/** Resolves and checks transfer targets; see the module comment. */
export class TransferTargets {
  constructor(private readonly deps: TransferTargetDeps) {}

  /** The player, or 400 for a malformed UUID and 404 when offline. */
  async onlinePlayer(uuid: string): Promise<OnlinePlayer> {
    if (!PLAYER_UUID_PATTERN.test(uuid)) throw badRequest(`playerUuid: not a UUID: ${uuid.slice(0, 64)}`);
    const player = await this.deps.players.get(uuid.toLowerCase());
    if (!player || (player.instanceId === null && player.proxyInstanceId === null)) throw notFound(`Player not online: ${uuid}`);
    return player;
  }

  /** Names of the groups whose instances are proxies. */
  async proxyGroups(): Promise<Set<string>> {
    return new Set((await this.deps.groups.listDocs()).filter((g) => isProxyPlatform(g.platform)).map((g) => g.name));
  }

  /** A move of `playerUuid` to the instance `targetInstanceId`. */
  async toInstance(playerUuid: string, targetInstanceId: string): Promise<TransferTarget> {
    const player = await this.onlinePlayer(playerUuid);
    const target = await this.deps.instances.getDoc(targetInstanceId);
    if (!target || FINISHED_STATES.has(target.state)) throw notFound(`Instance not found: ${targetInstanceId}`);
    if ((await this.proxyGroups()).has(target.group)) throw badRequest(`targetInstanceId: ${target.id} is a proxy`);
    if ((await this.deps.groups.getDoc(target.group))?.maintenance)
      throw conflict(`Group ${target.group} of ${target.id} is in maintenance and accepts no new players`, "GROUP_MAINTENANCE");
    if (target.state !== "RUNNING") throw conflict(`Instance ${target.id} is ${target.state}, not RUNNING`, "INVALID_STATE");
    if (player.instanceId === target.id) throw conflict(`Player ${player.uuid} is already on ${target.id}`, "ALREADY_ON_TARGET");
    return { player, targetInstanceId: target.id, targetGroup: null };
  }

  /** A move of `playerUuid` to the least-loaded RUNNING instance of `groupName` (ties by id). */
  async toGroup(playerUuid: string, groupName: string): Promise<TransferTarget> {
    const player = await this.onlinePlayer(playerUuid);
    const group = await this.deps.groups.getDoc(groupName);
    if (!group) throw notFound(`Group not found: ${groupName}`);
    if (isProxyPlatform(group.platform)) throw badRequest(`group: ${group.name} is a proxy group`);
    if (group.maintenance) throw conflict(`Group ${group.name} is in maintenance and accepts no new players`, "NO_RUNNING_INSTANCES");
    const running = (await this.deps.instances.findDocs({ group: group.name, state: "RUNNING" })).filter((i) => i.id !== player.instanceId);
    if (running.length === 0) throw conflict(`Group ${group.name} has no RUNNING instance to take the player`, "NO_RUNNING_INSTANCES");
    const loads = await Promise.all(running.map(async (i) => ({ id: i.id, players: await this.deps.players.countOn(i.id) })));
    loads.sort((a, b) => a.players - b.players || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    return { player, targetInstanceId: loads[0].id, targetGroup: group.name };
  }
}

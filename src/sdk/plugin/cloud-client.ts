/**
 * CloudClient: what a plugin asks of the control plane (spec document 3, "Plugin-side objects" and
 * the CloudClient mapping of "Client rules"). Requests go through the PluginTransport, so the client
 * rules (token refresh, sequence, timeout, trace context) hold for every call.
 */
import { CUSTOM_EVENT_TYPE_PATTERN } from "../contracts/plugin-events.js";
import { CloudApiError, InvalidArgumentError } from "./errors.js";
import { TransferResult } from "./transfer-result.js";
import type { PluginTransport } from "./transport.js";
import type {
  GroupInfo,
  InstanceInfo,
  MetricsPayload,
  PlayerAdmissionResult,
  PlayerMessage,
  PlayerPermissions,
  PlayerView,
  PluginMaintenance,
  Transfer,
} from "./types.js";

/** Refusal codes of `POST /api/plugin/player-join` (maintenance); the player is not let in. */
export const ADMISSION_REFUSALS: ReadonlySet<string> = new Set(["MAINTENANCE", "GROUP_MAINTENANCE"]);

export { CUSTOM_EVENT_TYPE_PATTERN };

/** The answer of a plugin GET list route: a JSON array (anything else is UNEXPECTED_BODY). */
function listOf<T>(body: unknown, key: string): T[] {
  if (Array.isArray(body)) return body as T[];
  throw new CloudApiError(200, "UNEXPECTED_BODY", `expected an array of ${key}`);
}

/** Which kind of workload the plugin runs in: proxies hold players, game servers host them. */
export type WorkloadKind = "server" | "proxy";

export interface CloudClientIdentity {
  instanceId: string;
  group: string;
  kind: WorkloadKind;
}

export class CloudClient {
  constructor(
    private readonly transport: PluginTransport,
    private readonly identity: CloudClientIdentity,
  ) {}

  /** This instance's id (`CLOUD_INSTANCE_ID`). */
  instanceId(): string {
    return this.identity.instanceId;
  }

  /** This instance's group (`CLOUD_GROUP`). */
  group(): string {
    return this.identity.group;
  }

  kind(): WorkloadKind {
    return this.identity.kind;
  }

  /** The server finished starting: `POST /api/plugin/ready`; the instance becomes RUNNING. */
  async markReady(): Promise<void> {
    await this.transport.post("/api/plugin/ready", {});
  }

  /** A no-op (a completed promise) on game-server platforms, as the spec says: the daemon sees a stop itself. */
  async markStopping(): Promise<void> {}

  /** A no-op (a completed promise) on game-server platforms: the daemon reports the exit and its log tail. */
  async reportCrash(exitCode: number, logTail: readonly string[]): Promise<void> {
    void exitCode;
    void logTail;
  }

  /** Moves a player to the least-loaded RUNNING instance of `group` (`POST /api/plugin/transfer-to-group`). */
  async transferPlayer(playerUuid: string, group: string): Promise<TransferResult> {
    return await this.transfer("/api/plugin/transfer-to-group", { playerUuid, group }, null);
  }

  /** Moves a player to one instance (`POST /api/plugin/transfer`). */
  async transferPlayerTo(playerUuid: string, targetInstanceId: string): Promise<TransferResult> {
    return await this.transfer("/api/plugin/transfer", { playerUuid, targetInstanceId }, targetInstanceId);
  }

  /**
   * The controller answers 202 with the queued Transfer: success names its target and id. A refusal
   * (400, 404, 409) or an unreachable controller is a failed result with the reason, never a throw.
   * How the move ends comes later on the event stream (PluginTransfers).
   */
  private async transfer(path: string, body: Record<string, string>, target: string | null): Promise<TransferResult> {
    try {
      const answer = await this.transport.post<Partial<Transfer> | null>(path, body);
      const named = typeof answer?.targetInstanceId === "string" ? answer.targetInstanceId : target;
      return TransferResult.success(named, typeof answer?.id === "string" ? answer.id : null);
    } catch (error) {
      if (error instanceof CloudApiError) return TransferResult.failure(error.status > 0 ? `${error.code}: ${error.message}` : error.message);
      throw error;
    }
  }

  /** One backend instance from `GET /api/plugin/instances`; InvalidArgumentError when it is not listed. */
  async fetchInstance(id: string): Promise<InstanceInfo> {
    const found = (await this.fetchInstances()).find((instance) => instance.id === id);
    if (!found) throw new InvalidArgumentError(`Instance ${id} not found`);
    return found;
  }

  /** Backend (non-proxy) instances: `GET /api/plugin/instances`. */
  async fetchInstances(): Promise<InstanceInfo[]> {
    return listOf<InstanceInfo>(await this.transport.get("/api/plugin/instances"), "instances");
  }

  /** Groups with their online counts: `GET /api/plugin/groups`. */
  async fetchGroups(): Promise<GroupInfo[]> {
    return listOf<GroupInfo>(await this.transport.get("/api/plugin/groups"), "groups");
  }

  /** Players across the network: `GET /api/plugin/players`. */
  async fetchPlayers(): Promise<PlayerView[]> {
    return listOf<Partial<PlayerView>>(await this.transport.get("/api/plugin/players"), "players").map(normalizePlayerView);
  }

  /** A player connected to this instance (fire-and-forget `POST /api/plugin/player-join`). */
  reportPlayerJoin(uuid: string, name: string): void {
    this.transport.report("/api/plugin/player-join", { uuid, name, group: this.identity.group });
  }

  /**
   * A player coming onto this instance, asked of the controller before letting it in (a proxy's
   * login, a server's join): `POST /api/plugin/player-join`, awaited. A refusal (403 MAINTENANCE or
   * GROUP_MAINTENANCE) is a result with the text to show the player. When the controller cannot
   * answer (no connection, 5xx) the player is admitted and the join is reported in the background
   * as any report: an outage of the control plane does not lock players out.
   */
  async admitPlayer(uuid: string, name: string): Promise<PlayerAdmissionResult> {
    const body = { uuid, name, group: this.identity.group };
    try {
      await this.transport.post("/api/plugin/player-join", body);
      return { admitted: true };
    } catch (error) {
      if (error instanceof CloudApiError && error.status === 403 && ADMISSION_REFUSALS.has(error.code)) {
        return { admitted: false, code: error.code, message: error.message };
      }
      if (error instanceof CloudApiError && error.retriable) {
        this.transport.report("/api/plugin/player-join", body);
        return { admitted: true };
      }
      throw error;
    }
  }

  /** Maintenance of the network and of this instance's group: `GET /api/plugin/maintenance`. */
  async fetchMaintenance(): Promise<PluginMaintenance> {
    const raw = await this.transport.get<Partial<PluginMaintenance> | null>("/api/plugin/maintenance");
    return {
      globalEnabled: raw?.globalEnabled === true,
      message: typeof raw?.message === "string" ? raw.message : null,
      groupMaintenance: raw?.groupMaintenance === true,
    };
  }

  /**
   * The permissions of the user `uuid` is linked to, read now (`GET /api/plugin/players/{uuid}/permissions`):
   * none, `linked: false`, for an account nobody linked. Errors throw CloudApiError.
   */
  async fetchPlayerPermissions(uuid: string): Promise<PlayerPermissions> {
    const raw = await this.transport.get<{ uuid?: unknown; linked?: unknown; permissions?: unknown } | null>(
      `/api/plugin/players/${encodeURIComponent(uuid)}/permissions`,
    );
    const permissions = Array.isArray(raw?.permissions) ? raw.permissions.filter((p): p is string => typeof p === "string") : [];
    return Object.freeze({ uuid: String(raw?.uuid ?? uuid).toLowerCase(), linked: raw?.linked === true, permissions: new Set(permissions) });
  }

  /**
   * Whether the user `uuid` is linked to holds `permission`
   * (`GET /api/plugin/players/{uuid}/permissions/{permission}`): false for an account nobody linked,
   * and false when the controller cannot answer (a permission is never granted on doubt).
   */
  async checkPermission(uuid: string, permission: string): Promise<boolean> {
    try {
      const raw = await this.transport.get<{ allowed?: unknown } | null>(
        `/api/plugin/players/${encodeURIComponent(uuid)}/permissions/${encodeURIComponent(permission)}`,
      );
      return raw?.allowed === true;
    } catch (error) {
      if (error instanceof CloudApiError) return false;
      throw error;
    }
  }

  /**
   * A player this instance holds, reported again (`POST /api/plugin/player-join`, the client rules of
   * every report): the registry lost it. Resolves once the report is settled; never rejects.
   */
  rejoinPlayer(uuid: string, name: string): Promise<void> {
    return this.transport.reportSettled("/api/plugin/player-join", { uuid, name, group: this.identity.group, rejoin: true });
  }

  /** A player left this instance (fire-and-forget `POST /api/plugin/player-leave`). */
  reportPlayerLeave(uuid: string): void {
    this.transport.report("/api/plugin/player-leave", { uuid });
  }

  /** A metrics snapshot (fire-and-forget `POST /api/plugin/metrics`). */
  reportMetrics(metrics: MetricsPayload): void {
    this.transport.report("/api/plugin/metrics", metrics);
  }

  /**
   * Publishes a custom event with this instance as its source (fire-and-forget `POST
   * /api/plugin/events`). The type must look like `MODULE:ACTION`; anything else throws at once.
   */
  publishEvent(type: string, data: Record<string, unknown> = {}): void {
    if (!CUSTOM_EVENT_TYPE_PATTERN.test(type)) throw new InvalidArgumentError(`event type must look like MODULE:ACTION, got "${type}"`);
    this.transport.report("/api/plugin/events", { type, data: data ?? {} });
  }

  /** Sends a player-to-player message (`POST /api/plugin/message/send`, 201); refusals throw CloudApiError (400, 403, 503). */
  async sendMessage(message: PlayerMessage): Promise<unknown> {
    return await this.transport.post("/api/plugin/message/send", message);
  }
}

/** A player record from the controller with every PlayerView field present. */
export function normalizePlayerView(raw: Partial<PlayerView>): PlayerView {
  return Object.freeze({
    uuid: String(raw.uuid ?? "").toLowerCase(),
    name: String(raw.name ?? ""),
    instanceId: String(raw.instanceId ?? ""),
    group: String(raw.group ?? ""),
    proxyInstanceId: typeof raw.proxyInstanceId === "string" ? raw.proxyInstanceId : null,
    connectedAt: typeof raw.connectedAt === "string" ? raw.connectedAt : null,
  });
}

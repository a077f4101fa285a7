/**
 * The cluster-shared settings: the controller.yml keys whose value the cluster holds once for
 * every controller (in its config versions, through Raft) and that each controller applies while
 * it runs, without a restart. A key the active version sets wins over controller.yml; a key it
 * does not set keeps each controller's controller.yml value. docs/decisions/cluster-config.md.
 */
import { Type, type Static } from "@sinclair/typebox";
import type { ControllerConfig } from "../../config/schema.js";

/** Every cluster-shared key (flat, as controller.yml spells its path) with its bounds. */
export const SharedSettingsSchema = Type.Object(
  {
    "scheduler.maxStartingPerNode": Type.Optional(Type.Integer({ minimum: 0, maximum: 10_000 })),
    "scheduler.auditRetentionDays": Type.Optional(Type.Integer({ minimum: 1, maximum: 3_650 })),
    "crashes.crashLoopThreshold": Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000 })),
    "crashes.crashLoopWindowSeconds": Type.Optional(Type.Integer({ minimum: 1, maximum: 86_400 })),
    "share.enabled": Type.Optional(Type.Boolean()),
    "share.defaultPrivate": Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type SharedSettings = Static<typeof SharedSettingsSchema>;
export type SharedSettingKey = keyof SharedSettings;

/** The keys, in display order. */
export const SHARED_SETTING_KEYS = Object.keys(SharedSettingsSchema.properties) as SharedSettingKey[];

/** Every key's value in a controller.yml. */
export function fileSettings(config: Pick<ControllerConfig, "scheduler" | "crashes" | "share">): Required<SharedSettings> {
  return {
    "scheduler.maxStartingPerNode": config.scheduler.maxStartingPerNode,
    "scheduler.auditRetentionDays": config.scheduler.auditRetentionDays,
    "crashes.crashLoopThreshold": config.crashes.crashLoopThreshold,
    "crashes.crashLoopWindowSeconds": config.crashes.crashLoopWindowSeconds,
    "share.enabled": config.share.enabled,
    "share.defaultPrivate": config.share.defaultPrivate,
  };
}

/** One key's value in force here and where it comes from. */
export interface EffectiveSetting {
  key: SharedSettingKey;
  value: number | boolean;
  source: "cluster" | "controller.yml";
}

/** The values in force: the cluster's where it sets one, else controller.yml's. Pure. */
export function effectiveSettings(file: Required<SharedSettings>, cluster: Readonly<Record<string, unknown>>): EffectiveSetting[] {
  return SHARED_SETTING_KEYS.map((key) => {
    const clusterValue = cluster[key];
    return clusterValue === undefined
      ? { key, value: file[key], source: "controller.yml" }
      : { key, value: clusterValue as number | boolean, source: "cluster" };
  });
}

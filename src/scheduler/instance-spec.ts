/**
 * What a daemon gets to run one instance: the proto `InstanceSpec` built from the group record, the
 * instance record and the instance's workload token.
 */
import type { StoredGroup } from "../domain/groups/group-service.js";
import type { InstanceFields } from "../domain/instances/instance-service.js";
import type { InstanceSpec } from "../wire/daemon-proto.js";
import type { RevisionSpec } from "./instance-lifecycle.js";

/**
 * Builds the spec of `instance` of `group`; the daemon fills the controller URL it reached. With the
 * instance's frozen `revision`, platform, jar and template layers (pinned to their hashes) come from
 * it instead of the group record.
 */
export function buildInstanceSpec(group: StoredGroup, instance: InstanceFields, workloadToken: string, revision?: RevisionSpec | null): InstanceSpec {
  return {
    instance_id: instance.id,
    group: group.name,
    platform: revision ? revision.platform : group.platform,
    port: instance.port,
    memory_mb: instance.memoryMb,
    static: group.static,
    environment: {},
    template_hashes: [],
    workload_token: workloadToken,
    controller_url: "",
    variables: {},
    templates: revision ? revision.templates.map((t) => ({ name: t.name, hash: t.hash })) : group.templates.map((name) => ({ name, hash: "" })),
    jar_file: revision ? revision.jarFile : group.jarFile,
    platform_version: (revision ? revision.platformVersion : group.platformVersion) ?? "",
    build_sha256: revision?.build?.sha256 ?? "",
  };
}

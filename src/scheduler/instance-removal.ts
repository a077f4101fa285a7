/**
 * `DELETE /api/v1/services/{id}`: removes the record of a finished (STOPPED or CRASHED) instance
 * before the finished-record sweep would. A live instance is refused (409 INSTANCE_NOT_FINISHED:
 * stop it first); a STATIC group's slot record is kept (409 STATIC_SLOT: it names the node holding
 * the slot's directory, and the slot starts there again). A finished record is never written
 * again (dynamic ids are not reused; slot ids are refused here), so the check and the delete
 * cannot be overtaken by a write of the owner.
 */
import type { GroupService } from "../domain/groups/group-service.js";
import type { InstanceService } from "../domain/instances/instance-service.js";
import { FINISHED_STATES, type Instance } from "../domain/instances/instance-schemas.js";
import { conflict, notFound } from "../shared/errors.js";
import { slotNumber } from "./static-slots.js";

export interface InstanceRemovalDeps {
  instances: Pick<InstanceService, "getDoc" | "get" | "remove">;
  groups: Pick<GroupService, "getDoc">;
}

/** Removes finished instance records; see the module comment. */
export class InstanceRemoval {
  constructor(private readonly deps: InstanceRemovalDeps) {}

  /** Removes the record; returns it as it was (the audit record's `before`). */
  async removeFinished(id: string): Promise<Instance> {
    const doc = await this.deps.instances.getDoc(id);
    if (!doc) throw notFound(`Instance not found: ${id}`);
    if (!FINISHED_STATES.has(doc.state))
      throw conflict(`Instance ${id} is ${doc.state}: only STOPPED or CRASHED instances are deleted; stop it first`, "INSTANCE_NOT_FINISHED");
    const group = await this.deps.groups.getDoc(doc.group);
    if (group?.static && slotNumber(group.name, id) !== null) {
      throw conflict(
        `Instance ${id} is a slot of STATIC group ${group.name}: its record stays (it names the node holding the slot's directory)`,
        "STATIC_SLOT",
      );
    }
    const before = await this.deps.instances.get(id);
    if (!(await this.deps.instances.remove(id))) throw notFound(`Instance not found: ${id}`);
    return before;
  }
}
